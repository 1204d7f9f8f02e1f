"""The top-level help, as typer renders it (tests/cli/test_help_text.py keeps it current)."""

TOP_LEVEL_HELP = (
    'Usage: topodoctor [OPTIONS] COMMAND [ARGS]...\n'
    '\n'
    '  GPU topology inspector and doctor: scan the topology, check its health,\n'
    '  measure its links.\n'
    '\n'
    'Options:\n'
    '  --version   Print the version.\n'
    '  -h, --help  Show this message and exit.\n'
    '\n'
    'Commands:\n'
    '  scan         Discover GPUs, NVLink/NVSwitch/PCIe links, NICs and NUMA...\n'
    '  record       Record every NVML call and sysfs read of a live scan, for...\n'
    '  check        Pre-job health check: probe, run the rules, exit 0 healthy /...\n'
    '  rules        List every code by what raises it (rules of a host,...\n'
    '  explain      Print the documentation of one code; CODE is a code (TD101,...\n'
    '  config       Show every setting a site may keep in its config file:...\n'
    '  expect       Write an expectations file from a known-good host (live or...\n'
    '  bandwidth    Measure GPU-to-GPU and host copies: bandwidth one way and...\n'
    '  collectives  Time NCCL collectives as nccl-tests does (busbw, #wrong) and...\n'
    "  fleet        Roll up many nodes' results: status per node, shared...\n"
    '  nccl-topo    Write an NCCL_TOPO_FILE for this host: the PCIe tree,...\n'
    "  nccl-log     Explain NCCL's output: NCCL version per rank, ranks and...\n"
    '  diagnose     Read the evidence users bring and say what it shows:...\n'
    '  job          Name the rank, node, GPU and collective of a hung or slow...\n'
    '\n'
    '  Exit codes: 0 ok, 1 unhealthy, 2 usage or input error, 3 could not check; each\n'
    "  command's --help has its own.\n"
)
