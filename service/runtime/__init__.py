"""How the service's loops wait and watch: a nap that any thread can end, a task awaited
with a companion beside it, and whether a process id is still alive."""
