# A kernel file of kernels/ops as C++ that emu_cuda.h runs on the CPU, for the run_*.sh scripts of this folder:
# device_util.cuh's load_f32 / store_f32, then the file from its namespace on with every
# kernel<<<grid, threads, smem, stream>>>(args) an emu_launch noted by its launch site, launch checks dropped and
# static __shared__ variables made static (one block runs at a time). namespace: where the file's code goes
# (mt::cuda, or another to hold an earlier version of the same file beside it).
import re

HEAD = ('#include <cfloat>\n#include <cmath>\n#include <type_traits>\n#include "emu_cuda.h"\n'
        '#include "core/activation.h"\nusing cudaStream_t = void*;\n')


def device_util_packs(ops):
    util = open(f'{ops}/device_util.cuh').read()
    a, b = util.index('// N consecutive elements as fp32'), util.index('// Butterfly sum')
    return 'namespace mt::cuda {\n' + util[a:b] + '}  // namespace mt::cuda\n'


def call_end(s, i):  # index just past the parenthesised group opening at s[i]
    depth = 0
    for k in range(i, len(s)):
        depth += {'(': 1, ')': -1}.get(s[k], 0)
        if depth == 0:
            return k + 1
    raise SystemExit('unbalanced parentheses')


def split_top(s):  # comma-separated at depth 0
    parts, depth, cur = [], 0, ''
    for c in s:
        depth += {'(': 1, ')': -1}.get(c, 0)
        if c == ',' and depth == 0:
            parts.append(cur.strip()); cur = ''
        else:
            cur += c
    return parts + [cur.strip()]


def rewrite(s, ops, namespace='mt::cuda'):
    s = s[s.index('namespace mt::cuda {'):]
    if namespace != 'mt::cuda':
        s = s.replace('namespace mt::cuda {', f'namespace {namespace} {{\nusing namespace mt::cuda;', 1)
    s = re.sub(r'(?<!extern )__shared__ ', 'static ', s)
    while (m := re.search(r'MT_CHECK_LAUNCH\(', s)):
        end = call_end(s, m.end() - 1)
        s = s[:m.start()] + s[end:].removeprefix(';')
    out, pos, launches = '', 0, 0
    for m in re.finditer(r'([A-Za-z_]\w*(?:<[^<>;]*>)?)<<<', s):
        if m.start() < pos:
            continue
        cfg_end = s.index('>>>', m.end())
        grid, threads, smem, _ = split_top(s[m.end():cfg_end])
        args_end = call_end(s, cfg_end + 3)
        assert s[args_end] == ';'
        k = m.group(1)
        out += s[pos:m.start()] + (f'{{ emu_note_launch("{k}"); emu_launch({grid}, {threads}, {smem}, [&] {{ {k}'
                                   f'{s[cfg_end + 3:args_end]}; }}); }}')
        pos = args_end + 1
        launches += 1
    assert launches, 'no launches found'
    return HEAD + device_util_packs(ops) + out + s[pos:]
