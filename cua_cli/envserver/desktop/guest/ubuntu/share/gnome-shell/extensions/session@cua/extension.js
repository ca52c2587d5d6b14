/* What cua's desktops add to Ubuntu's session, in the shell itself:
   - Ctrl+Alt+T opens a new terminal window with the keyboard focus, as Ubuntu's settings daemon does.
     Grabbed here rather than by gsd-media-keys, which grabs its keys some time after it starts: a
     key pressed before then would be lost.
   - Once the shell's startup is complete (its first frame drawn; until then it takes no keys), the
     file $XDG_RUNTIME_DIR/shell-started says so: the desktop is ready only then. */
const { GLib, Meta, Shell } = imports.gi;
const Main = imports.ui.main;

let action = Meta.KeyBindingAction.NONE;
let handler = 0;

function init() {}

function announceStarted() {
    GLib.file_set_contents(`${GLib.get_user_runtime_dir()}/shell-started`, '');
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
            announceStarted();
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
