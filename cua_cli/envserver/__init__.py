"""Built-in env server: real MiniWoB++ tasks behind the env-cluster HTTP protocol."""
