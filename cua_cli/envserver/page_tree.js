// Lists what a MiniWoB page shows as an accessibility-tree-like outline (the
// shape of WebArena's observation). Run as an execute_script body; arguments:
// [fresh]. fresh (true at an episode's start) forgets every id given so far.
//
// A listed node keeps its numeric id for as long as it stays in the page:
// elements carry it in the data-cua-id attribute, text nodes (which have no
// attributes) in a WeakMap. window.__cua.nodes maps the ids of the last
// listing back to their nodes, for the actions that name them.
//
// Returns {title, url, rows}; a row is [id, depth, role, name, props], and
// props is a list of [key, value] pairs.
var ATTR = 'data-cua-id';
if (arguments[0] || !window.__cua) {
  document.querySelectorAll('[' + ATTR + ']').forEach(function (e) { e.removeAttribute(ATTR); });
  window.__cua = {next: 1, texts: new WeakMap(), nodes: new Map()};
}
var state = window.__cua;
state.nodes = new Map();
var rows = [];

// MiniWoB's own furniture, not part of the task.
var SKIP_IDS = {'reward-display': 1, 'sync-task-cover': 1, 'click-canvas': 1};
var SKIP_TAGS = {SCRIPT: 1, STYLE: 1, NOSCRIPT: 1, TEMPLATE: 1, HEAD: 1, META: 1, LINK: 1, BR: 1};
var TAG_ROLES = {
  BUTTON: 'button', TEXTAREA: 'textbox', OPTION: 'option', IMG: 'img', UL: 'list', OL: 'list',
  LI: 'listitem', TABLE: 'table', TR: 'row', TD: 'cell', TH: 'columnheader', LABEL: 'LabelText',
  P: 'paragraph', FORM: 'form', FIELDSET: 'group', LEGEND: 'Legend', DIALOG: 'dialog',
  PROGRESS: 'progressbar', SVG: 'img', CANVAS: 'canvas',
  H1: 'heading', H2: 'heading', H3: 'heading', H4: 'heading', H5: 'heading', H6: 'heading'
};
var INPUT_ROLES = {
  button: 'button', submit: 'button', reset: 'button', image: 'button', file: 'button',
  checkbox: 'checkbox', radio: 'radio', range: 'slider', number: 'spinbutton', search: 'searchbox'
};
// Roles whose content is their name: listed on one line, nothing inside them.
var LEAF = {
  button: 1, link: 1, option: 1, heading: 1, textbox: 1, searchbox: 1, spinbutton: 1, slider: 1,
  checkbox: 1, radio: 1, 'switch': 1, combobox: 1, listbox: 1, img: 1, tab: 1, menuitem: 1,
  menuitemcheckbox: 1, menuitemradio: 1, treeitem: 1, progressbar: 1
};
var FROM_CONTENT = {
  button: 1, link: 1, option: 1, heading: 1, tab: 1, menuitem: 1, menuitemcheckbox: 1,
  menuitemradio: 1, treeitem: 1, cell: 1, columnheader: 1, rowheader: 1
};
// Containers listed even without a name: their structure helps read the page.
var KEEP_UNNAMED = {table: 1, row: 1, dialog: 1, tablist: 1, tabpanel: 1, menu: 1, radiogroup: 1};

function norm(s) { return (s || '').replace(/\s+/g, ' ').trim(); }

function roleOf(el) {
  var explicit = norm(el.getAttribute('role')).split(' ')[0];
  if (explicit) return explicit;
  var tag = el.tagName.toUpperCase();
  if (tag === 'INPUT') return INPUT_ROLES[(el.type || 'text').toLowerCase()] || 'textbox';
  if (tag === 'A') return el.hasAttribute('href') ? 'link' : 'generic';
  if (tag === 'SELECT') return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
  return TAG_ROLES[tag] || 'generic';
}

function nameOf(el, role) {
  var aria = norm(el.getAttribute('aria-label'));
  if (aria) return aria;
  var tag = el.tagName.toUpperCase();
  if (tag === 'INPUT' && role === 'button') {
    return norm(el.value) || {submit: 'Submit', reset: 'Reset'}[el.type] || '';
  }
  if (tag === 'IMG') return norm(el.alt || el.title);
  if (el.labels && el.labels.length) {
    return norm(Array.prototype.map.call(el.labels, function (l) { return l.innerText; }).join(' '));
  }
  if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT') return norm(el.placeholder || el.title);
  return FROM_CONTENT[role] ? norm(el.innerText) : '';
}

function propsOf(el, role) {
  var props = [];
  if (el === document.activeElement) props.push(['focused', true]);
  if (role === 'checkbox' || role === 'radio' || role === 'switch') {
    props.push(['checked', String(el.checked !== undefined ? el.checked : el.getAttribute('aria-checked') === 'true')]);
  }
  if (el.disabled) props.push(['disabled', true]);
  if (role === 'textbox' || role === 'searchbox' || role === 'spinbutton') {
    props.push(['required', !!el.required]);
    if (el.value) props.push(['value', el.value]);
  }
  if (role === 'slider' && el.value) props.push(['value', el.value]);
  if (role === 'combobox' && el.selectedIndex >= 0) props.push(['value', norm(el.options[el.selectedIndex].text)]);
  if (role === 'option' && el.selected) props.push(['selected', true]);
  return props;
}

function idOf(node) {
  var id;
  if (node.nodeType === 3) {
    id = state.texts.get(node);
  } else {
    id = Number(node.getAttribute(ATTR)) || undefined;
  }
  // A copy of a listed element (cloneNode copies attributes) must not share its id.
  if (id === undefined || (state.nodes.has(id) && state.nodes.get(id) !== node)) {
    id = state.next++;
    if (node.nodeType === 3) state.texts.set(node, id); else node.setAttribute(ATTR, String(id));
  }
  state.nodes.set(id, node);
  return id;
}

function emit(node, depth, role, name, props) {
  rows.push([idOf(node), depth, role, name, props]);
}

function hidden(el) {
  if (SKIP_TAGS[el.tagName.toUpperCase()] || SKIP_IDS[el.id] || el.getAttribute('aria-hidden') === 'true') {
    return true;
  }
  return el.getClientRects().length === 0 || getComputedStyle(el).visibility !== 'visible';
}

function visit(node, depth) {
  if (node.nodeType === 3) {
    var text = norm(node.data);
    if (text) emit(node, depth, 'StaticText', text, []);
    return;
  }
  if (node.nodeType !== 1 || hidden(node)) return;
  var el = node, role = roleOf(el);
  if (el.tagName === 'LABEL' && el.control && el.contains(el.control)) {
    visit(el.control, depth);  // the label's text is already the control's name
    return;
  }
  if (LEAF[role]) {
    emit(el, depth, role, nameOf(el, role), propsOf(el, role));
    if (el.tagName === 'SELECT') {
      Array.prototype.forEach.call(el.options, function (o) {
        emit(o, depth + 1, 'option', norm(o.text), propsOf(o, 'option'));
      });
    }
    return;
  }
  if (el.id === 'query') {  // the task statement, in one line rather than in pieces
    emit(el, depth, 'StaticText', norm(el.textContent), []);
    return;
  }
  var kids = Array.prototype.filter.call(el.childNodes, function (c) {
    return c.nodeType === 1 || (c.nodeType === 3 && norm(c.data));
  });
  if (kids.length && kids.every(function (c) { return c.nodeType === 3; })) {
    var content = norm(el.innerText);
    if (content) emit(el, depth, FROM_CONTENT[role] ? role : 'StaticText', content, []);
    return;
  }
  var name = nameOf(el, role), shown = name || KEEP_UNNAMED[role];
  if (shown) emit(el, depth, role, name, propsOf(el, role));
  kids.forEach(function (c) { visit(c, shown ? depth + 1 : depth); });
}

emit(document.documentElement, 0, 'RootWebArea', norm(document.title), document.hasFocus() ? [['focused', true]] : []);
if (document.body) visit(document.body, 1);
return {title: norm(document.title), url: location.href, rows: rows};
