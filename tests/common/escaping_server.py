# A stdio "server" that starts two processes that leave its process group: a classic daemon
# (fork, setsid, fork) and a child that calls setsid(). Each writes its pid to a file in DIR
# (`daemon`, `setsid`); then the server exits (MODE `exit`) or stays (`stay`). All of them keep
# its stdout open. Used by src/mcp/stdio.rs's tests and tests/startup.rs.
# Usage: python3 escaping_server.py DIR MODE
import os, sys, time
dir, mode = sys.argv[1], sys.argv[2]
def note(name):
    tmp = os.path.join(dir, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(str(os.getpid()))
    os.rename(tmp, os.path.join(dir, name))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        note("daemon")
        time.sleep(3600)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    note("setsid")
    time.sleep(3600)
while not all(os.path.exists(os.path.join(dir, n)) for n in ("daemon", "setsid")):
    time.sleep(0.01)
if mode == "exit":
    sys.exit(0)
time.sleep(3600)
