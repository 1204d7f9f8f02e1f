"""The probe: NVML and sysfs into a HostSnapshot (``sources.probe_host``), live, recorded or replayed.

The package itself imports nothing, so a probe's child can load the live binding
(``probe.nvml``) and start NVML before the rest of the probe is loaded."""
