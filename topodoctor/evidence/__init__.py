"""The readers of the evidence users bring (``topodoctor diagnose``): nccl-tests' tables, nvidia-smi's
outputs, copy matrices, NCCL's XML dumps and logs, lspci, kernel XID lines and launch command lines,
each detected by its content and read into ``model.evidence``'s plain data. ``inputs`` cuts a paste
into pieces and joins them; one module per family of kinds reads them. No I/O here: the service
reads the files, bounded, and hands their text down.
"""
