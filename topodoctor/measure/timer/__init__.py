"""The one CUDA timer (the CUDA driver API through ctypes, no torch) and the plans a timer process
serves with it: a bandwidth pass's and the fitness tests' (``plans``). Its parents are elsewhere:
measure/copies drives a bandwidth pass's timer, measure/fitness the fitness tests' timer."""
