"""topodoctor from Python: probe a host, judge it as ``topodoctor check`` does, and run the
measurements, with no command line in between (docs/api.md).

The names are reached through ``topodoctor`` itself (``topodoctor.scan``, ``topodoctor.check``...),
each module loaded on first use, so ``import topodoctor`` costs nothing: ``host`` (``scan``,
``Host``), ``verdict`` (``check``, ``Report``), ``measure`` (``bandwidth``, ``collectives``,
``predict``). This package sits above the service layer, beside the command line, which it never
imports.
"""
