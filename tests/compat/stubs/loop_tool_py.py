"""Stand-in for loop_tool_py (not in Debian): the one call CompilerGym's tests make.

CompilerGym's tests/loop_tool/actions_test.py parametrizes over `lt.backends()`. A LoopTool
server has only a CPU backend (loop_tool-cuda-v0 is refused with UNIMPLEMENTED).
"""


def backends():
    return ["cpu"]
