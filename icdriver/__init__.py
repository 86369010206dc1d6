"""The in-container driver: one long-lived process per container, started once through `docker exec`.

It reads request frames on stdin and writes reply frames on stdout (the protocol: `protocol`).
Standard library only, so any image with python3 can carry it; images get it as one zipapp,
`/usr/lib/intercode/icdriver.pyz`, built from this package (orchestrator/images/build_context.py).
The host imports only `icdriver.protocol`.

  protocol  version, ops, the frame codec        server   the main loop and the ops
  process   process groups, strays, reaping      session  op `session`: one persistent bash
  capture   output capped, from a pipe or text   repl     op `python`: persistent interpreters
  restore   the build-time snapshot and the reset that brings files back to pristine
"""
