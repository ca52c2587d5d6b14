/* What cua's desktops add to Ubuntu's session, in the shell itself:
   - Ctrl+Alt+T opens a new terminal window with the keyboard focus, as Ubuntu's settings daemon does.
     Grabbed here rather than by gsd-media-keys, which grabs its keys some time after it starts: a
     key pressed before then would be lost.
   - Once the shell's startup is complete (its first frame drawn; until then it takes no keys) and
     the keyboard has settled (below), the file $XDG_RUNTIME_DIR/shell-started says so: the desktop
     is ready only then. */
const { Clutter, GLib, Meta, Shell } = imports.gi;
const Main = imports.ui.main;

let action = Meta.KeyBindingAction.NONE;
let handler = 0;

function init() {}

function announceStarted() {
    GLib.file_set_contents(`${GLib.get_user_runtime_dir()}/shell-started`, '');
}

/* Every key an agent presses comes through XTest, whose keyboard is a device of its own in X. The
   first XTest key makes X switch its core keyboard to that device, which tells every client that the
   keymap changed; mutter then takes back all its key grabs and grabs them again. A key that reaches
   X in between goes to no grab: a young desktop lost its first Ctrl+Alt+T about one time in five on
   a busy host. So the shell presses Shift once through XTest itself (a virtual keyboard is XTest on
   X11) and the desktop is ready once mutter has grabbed its keys again. */
const SETTLE_TIMEOUT_S = 10;  // a core keyboard already on XTest changes nothing: do not wait forever

function settleKeyboard(done) {
    const backend = Meta.get_backend();
    let keyboard = Clutter.get_default_backend().get_default_seat()
        .create_virtual_device(Clutter.InputDeviceType.KEYBOARD_DEVICE);
    let changed = 0, timeout = 0;
    const finish = () => {
        backend.disconnect(changed);  // connected after mutter's own handler: its grabs are back
        if (timeout)
            GLib.source_remove(timeout);
        keyboard = null;
        done();
    };
    changed = backend.connect('keymap-changed', finish);
    timeout = GLib.timeout_add_seconds(GLib.PRIORITY_DEFAULT, SETTLE_TIMEOUT_S, () => {
        timeout = 0;
        finish();
        return GLib.SOURCE_REMOVE;
    });
    const now = GLib.get_monotonic_time();
    keyboard.notify_keyval(now, Clutter.KEY_Shift_L, Clutter.KeyState.PRESSED);
    keyboard.notify_keyval(now, Clutter.KEY_Shift_L, Clutter.KeyState.RELEASED);
}

function enable() {
    action = global.display.grab_accelerator('<Control><Alt>t', Meta.KeyBindingFlags.NONE);
    Main.wm.allowKeybinding(Meta.external_binding_name_for_action(action),
        Shell.ActionMode.NORMAL | Shell.ActionMode.OVERVIEW);
    handler = global.display.connect('accelerator-activated', (display, activated) => {
        if (activated !== action)
            return;
        Main.overview.hide();
        Shell.AppSystem.get_default().lookup_app('org.gnome.Terminal.desktop')?.open_new_window(-1);
    });
    if (Main.layoutManager._startingUp) {
        const id = Main.layoutManager.connect('startup-complete', () => {
            Main.layoutManager.disconnect(id);
            settleKeyboard(announceStarted);
        });
    } else {
        announceStarted();
    }
}

function disable() {
    global.display.disconnect(handler);
    global.display.ungrab_accelerator(action);
    handler = 0;
    action = Meta.KeyBindingAction.NONE;
}
