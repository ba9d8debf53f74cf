#!/usr/bin/env python3
"""Canonical form of what CPython's pickle loads, for memscope's
differential test of its pickle reader.

Stdlib only. For each FILE prints "OK <sha256>" of the canonical form, or
"ERR <exception type>" when pickle.load (with a find_class that refuses
every global, as memscope refuses them) fails. --full prints the canonical
text instead of its hash.

  pickle_canon.py [--full] FILE...

The canonical form (mirrored in snapshot/differential_test.go):
  None N, True T, False F, int i<decimal> (I for ints outside [-2^63, 2^64)),
  float f<16 hex digits of the IEEE bits>, str s<hex of UTF-8>, bytes
  b<hex>, list [a,b], tuple (a,b), dict {k:v,...} and set <...> with
  entries sorted by their canonical text, a container inside itself @.
The one normalisation: a dict of exactly filename/line/name (a stack
frame) whose line is outside int64 has line -1, as memscope reads it.
"""
import hashlib
import io
import pickle
import struct
import sys


class Refusing(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s refused" % (module, name))


def elements(x, stack):
    """The canonical texts of a container's elements, in its order."""
    stack.add(id(x))
    parts = []
    for e in x:
        p = []
        canon(e, p, stack)
        parts.append("".join(p))
    stack.discard(id(x))
    return parts


def canon(x, out, stack):
    if id(x) in stack and isinstance(x, (list, dict, set, tuple, frozenset)):
        out.append("@")
        return
    if x is None:
        out.append("N")
    elif x is True:
        out.append("T")
    elif x is False:
        out.append("F")
    elif isinstance(x, int):
        out.append("i%d" % x if -(1 << 63) <= x < (1 << 64) else "I")
    elif isinstance(x, float):
        out.append("f" + struct.pack(">d", x).hex())
    elif isinstance(x, str):
        out.append("s" + x.encode("utf-8", "surrogatepass").hex())
    elif isinstance(x, (bytes, bytearray)):
        out.append("b" + bytes(x).hex())
    elif isinstance(x, (list, tuple)):
        o, c = ("[", "]") if isinstance(x, list) else ("(", ")")
        out.append(o + ",".join(elements(x, stack)) + c)
    elif isinstance(x, dict):
        stack.add(id(x))
        frame = (set(x.keys()) == {"filename", "line", "name"} and isinstance(x["filename"], str)
                 and isinstance(x["name"], str) and isinstance(x["line"], int) and not isinstance(x["line"], bool))
        items = []
        for k, v in x.items():
            if frame and k == "line" and not (-(1 << 63) <= v < (1 << 63)):
                v = -1
            pk, pv = [], []
            canon(k, pk, stack)
            canon(v, pv, stack)
            items.append("".join(pk) + ":" + "".join(pv))
        stack.discard(id(x))
        out.append("{" + ",".join(sorted(items)) + "}")
    elif isinstance(x, (set, frozenset)):
        out.append("<" + ",".join(sorted(elements(x, stack))) + ">")
    else:
        out.append("?" + type(x).__name__)


# CPython sizes its memo to the largest index a PUT names: a 15-byte pickle
# with LONG_BINPUT 0x427d7d7d asked for 17 GB and hung the fuzzer. Capped,
# such an input is a MemoryError (an ERR line) like any other refusal.
ADDRESS_SPACE = 4 << 30


def main():
    full = "--full" in sys.argv
    sys.setrecursionlimit(100000)
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    except (ImportError, ValueError, OSError):
        pass  # not on Linux, or a lower limit already
    for path in [a for a in sys.argv[1:] if a != "--full"]:
        try:
            with open(path, "rb") as f:
                v = Refusing(io.BytesIO(f.read())).load()
            out = []
            canon(v, out, set())
            text = "".join(out)
            print(text if full else "OK " + hashlib.sha256(text.encode()).hexdigest(), flush=True)
        except RecursionError:
            print("ERR RecursionError", flush=True)
        except Exception as e:  # any failure to load: memscope may refuse too
            print("ERR " + type(e).__name__, flush=True)


if __name__ == "__main__":
    main()
