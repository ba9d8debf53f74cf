#!/usr/bin/env python3
"""Write a CUDA allocator snapshot as PyTorch's C++ pickler lays it out.

torch::cuda::_memory_snapshot_pickled() (the C++ API's snapshot) writes
protocol 2: a dict or list is EMPTY_DICT/EMPTY_LIST, MARK, items,
SETITEMS/APPENDS, all of a list's items in one batch, with a put only after
a shared value (a frame dict met again, a string), never before the MARK.
Then, unless OUT_PY is '-', the same object as pickle.dump writes it with
protocol 4.

    gen_cpp_snapshot.py ENTRIES OUT OUT_PY [FRAMES [DEVICES [BLOCKS]]]

ENTRIES trace entries over FRAMES distinct frames (20), split evenly over
DEVICES devices (1), after BLOCKS blocks (1: one inactive block; the others
are active, with frames). memscope's tests run it (snapshot/pickle).
"""
import pickle, struct, sys
if len(sys.argv) < 4:
    sys.exit(__doc__)
out, memo, strs, frames = bytearray(b'\x80\x02'), [0], {}, {}
nframes = int(sys.argv[4]) if len(sys.argv) > 4 else 20
nblocks = int(sys.argv[6]) if len(sys.argv) > 6 else 1
def put():
    i = memo[0]
    out.extend(b'q' + bytes([i]) if i < 256 else b'r' + struct.pack('<I', i))
    memo[0] += 1
    return i
def get(i):
    out.extend(b'h' + bytes([i]) if i < 256 else b'j' + struct.pack('<I', i))
def pstr(s):
    if s in strs:
        return get(strs[s])
    b = s.encode()
    out.extend(b'X' + struct.pack('<I', len(b)) + b)
    strs[s] = put()
def pint(v):
    if 0 <= v < 256: out.extend(b'K' + bytes([v]))
    elif 0 <= v < 65536: out.extend(b'M' + struct.pack('<H', v))
    elif -2**31 <= v < 2**31: out.extend(b'J' + struct.pack('<i', v))
    else:
        b = v.to_bytes((v.bit_length() + 8) // 8, 'little', signed=True)
        out.extend(b'\x8a' + bytes([len(b)]) + b)
def frame(i):
    if i in frames:
        return get(frames[i])
    out.extend(b'}(')
    pstr('filename'); pstr('/src/m%d.py' % (i % 5)); pstr('line'); pint(10 + i); pstr('name'); pstr('f%d' % (i % 3))
    out.extend(b'u')
    frames[i] = put()
out.extend(b'}(')
pstr('segments'); out.extend(b'](}(')
used = 512 * (nblocks - 1)
for k, v in [('device', 0), ('address', 4096), ('total_size', (1 << 20) + used), ('allocated_size', used), ('active_size', used), ('requested_size', used), ('stream', 0)]:
    pstr(k); pint(v)
pstr('segment_type'); pstr('large'); pstr('blocks'); out.extend(b'](}(')
for k, v in [('address', 4096), ('size', 1 << 20), ('requested_size', 1 << 20)]:
    pstr(k); pint(v)
pstr('state'); pstr('inactive'); out.extend(b'u')
for b in range(1, nblocks):
    out.extend(b'}(')
    for k, v in [('address', 4096 + (1 << 20) + 512 * (b - 1)), ('size', 512), ('requested_size', 512)]:
        pstr(k); pint(v)
    pstr('state'); pstr('active_allocated'); pstr('frames'); out.extend(b'](')
    for j in range(1 + b % 4):
        frame((b + j) % nframes)
    out.extend(b'eu')
out.extend(b'eue')
pstr('device_traces'); out.extend(b'](](')
n, devices = int(sys.argv[1]), int(sys.argv[5]) if len(sys.argv) > 5 else 1
for i in range(n):
    if i and i % (n // devices) == 0 and i // (n // devices) < devices:
        out.extend(b'e](')  # the next device's trace
    out.extend(b'}(')
    pstr('action'); pstr(['alloc', 'free_requested', 'free_completed'][i % 3])
    pstr('addr'); pint(139637976727552 + 512 * (i // 3))
    pstr('size'); pint(512); pstr('stream'); pint(0); pstr('time_us'); pint(1700000000000000 + i)
    pstr('frames'); out.extend(b'](')
    for j in range(1 + i % 4):
        frame((i + j) % nframes)
    out.extend(b'eu')
out.extend(b'eeu.')
open(sys.argv[2], 'wb').write(out)
if sys.argv[3] != '-':
    pickle.dump(pickle.loads(bytes(out)), open(sys.argv[3], 'wb'), protocol=4)
