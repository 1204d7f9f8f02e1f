"""NCCL's output explained: any program's log (a job's stderr, ``NCCL_DEBUG_FILE`` files,
nccl-tests' output) parsed into plain data (``parse``, ``choices``), and that data turned into
findings with a code, the evidence line and a fix (``explain``). No I/O here but the command's."""
