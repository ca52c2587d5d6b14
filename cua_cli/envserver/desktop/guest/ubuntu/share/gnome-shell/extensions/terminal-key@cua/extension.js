/* Ctrl+Alt+T opens a new terminal window with the keyboard focus, as Ubuntu's settings daemon does.
   Grabbed here, inside the shell, rather than by gsd-media-keys: that daemon grabs its keys some time
   after it starts, and a key pressed before then would be lost. */
const { Meta, Shell } = imports.gi;
const Main = imports.ui.main;

let action = Meta.KeyBindingAction.NONE;
let handler = 0;

function init() {}

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
}

function disable() {
    global.display.disconnect(handler);
    global.display.ungrab_accelerator(action);
    handler = 0;
    action = Meta.KeyBindingAction.NONE;
}
