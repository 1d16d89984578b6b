"""Random JSON documents drawn from a JSON Schema, for the JSON Schema property test.

Candidates follow the output policy of src/grammar/json_schema.h (declared properties in schema
order, extra keys only where additionalProperties or patternProperties allow them explicitly, no
type other than the ones a type-less schema's keywords name); the test keeps only the candidates
that python `jsonschema` validates, so a bug here can lose coverage but never a false failure.
"""

import datetime
import random
import string

try:
    import re._parser as sre_parse  # Python >= 3.11
    import re._constants as sre_c
except ImportError:  # pragma: no cover
    import sre_parse
    import sre_constants as sre_c

ALPHABET = string.ascii_letters + string.digits + " _-.:/@\"\\\n\té€😀"


class Skip(Exception):
    """The generator cannot produce a candidate for this schema."""


def _category(cat, rng):
    if cat == sre_c.CATEGORY_DIGIT:
        return rng.choice(string.digits)
    if cat == sre_c.CATEGORY_WORD:
        return rng.choice(string.ascii_letters + string.digits + "_")
    if cat == sre_c.CATEGORY_SPACE:
        return " "
    if cat == sre_c.CATEGORY_NOT_DIGIT:
        return rng.choice(string.ascii_letters)
    if cat == sre_c.CATEGORY_NOT_WORD:
        return rng.choice(" -.")
    return rng.choice(string.ascii_letters)


def _from_class(items, rng):
    negate = any(op == sre_c.NEGATE for op, _ in items)
    choices = []
    for op, av in items:
        if op == sre_c.LITERAL:
            choices.append(chr(av))
        elif op == sre_c.RANGE:
            lo, hi = av
            choices.append(chr(rng.randint(lo, min(hi, lo + 200))))
        elif op == sre_c.CATEGORY:
            choices.append(_category(av, rng))
    if negate:
        banned = set(choices)
        pool = [c for c in string.ascii_letters + string.digits + " _-." if c not in banned]
        if not pool:
            raise Skip("empty class")
        return rng.choice(pool)
    if not choices:
        raise Skip("empty class")
    return rng.choice(choices)


def _regex_walk(tree, rng, out):
    for op, av in tree:
        if op == sre_c.LITERAL:
            out.append(chr(av))
        elif op == sre_c.NOT_LITERAL:
            out.append(rng.choice([c for c in "abcXYZ019 " if ord(c) != av]))
        elif op == sre_c.ANY:
            out.append(rng.choice(string.ascii_letters + string.digits))
        elif op == sre_c.IN:
            out.append(_from_class(av, rng))
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
            lo, hi, sub = av
            hi = lo + 3 if hi == sre_c.MAXREPEAT else min(hi, lo + 3)
            for _ in range(rng.randint(lo, hi)):
                _regex_walk(sub, rng, out)
        elif op == sre_c.SUBPATTERN:
            _regex_walk(av[-1], rng, out)
        elif op == sre_c.BRANCH:
            _regex_walk(rng.choice(av[1]), rng, out)
        elif op == sre_c.AT:
            continue
        elif op == sre_c.CATEGORY:
            out.append(_category(av, rng))
        else:
            raise Skip(f"regex op {op}")


def regex_sample(pattern, rng):
    try:
        tree = sre_parse.parse(pattern)
    except Exception as e:
        raise Skip(f"regex {pattern!r}: {e}")
    out = []
    _regex_walk(tree, rng, out)
    return "".join(out)


def _date(rng):
    d = datetime.date(2000, 1, 1) + datetime.timedelta(days=rng.randint(0, 9000))
    return d.isoformat()


FORMATS = {
    "date": _date,
    "date-time": lambda r: _date(r) + "T%02d:%02d:%02dZ" % (r.randint(0, 23), r.randint(0, 59),
                                                            r.randint(0, 59)),
    "time": lambda r: "%02d:%02d:%02d+01:00" % (r.randint(0, 23), r.randint(0, 59),
                                                r.randint(0, 59)),
    "email": lambda r: r.choice(["a.b", "x", "first+tag"]) + "@example.com",
    "uuid": lambda r: "%08x-%04x-%04x-%04x-%012x" % (r.getrandbits(32), r.getrandbits(16),
                                                     r.getrandbits(16), r.getrandbits(16),
                                                     r.getrandbits(48)),
    "uri": lambda r: r.choice(["https://example.com/a?b=c#d", "urn:isbn:0451450523",
                               "http://x.org", "mailto:a@b.c"]),
    "uri-reference": lambda r: r.choice(["/a/b", "https://example.com/", "c?d"]),
    "ipv4": lambda r: ".".join(str(r.randint(0, 255)) for _ in range(4)),
    "ipv6": lambda r: r.choice(["::1", "fe80::1:2", "2001:db8:0:0:1:0:0:1", "::"]),
    "hostname": lambda r: r.choice(["example.com", "a-b.c", "localhost"]),
    "byte": lambda r: r.choice(["", "YQ==", "YWJj", "YWI="]),
    "duration": lambda r: r.choice(["P1D", "PT5M", "P1Y2M3DT4H5M6S", "P3W"]),
}


class Generator:
    def __init__(self, root, rng):
        self.root = root
        self.rng = rng

    def resolve(self, ref):
        if not ref.startswith("#"):
            raise Skip("outside ref")
        node = self.root
        for tok in ref[1:].split("/")[1:]:
            tok = tok.replace("~1", "/").replace("~0", "~")
            tok = __import__("urllib.parse").parse.unquote(tok)
            if isinstance(node, list):
                node = node[int(tok)]
            elif isinstance(node, dict) and tok in node:
                node = node[tok]
            else:
                raise Skip("ref does not resolve")
        return node

    def flatten(self, s, depth=0):
        """Resolves $ref and merges allOf (naively) into one dict."""
        if depth > 20:
            raise Skip("deep refs")
        if s is True or s == {}:
            return {}
        if s is False:
            raise Skip("false schema")
        if not isinstance(s, dict):
            raise Skip("odd schema")
        if "$ref" in s:
            rest = {k: v for k, v in s.items() if k != "$ref"}
            target = self.flatten(self.resolve(s["$ref"]), depth + 1)
            return self.merge(target, self.flatten(rest, depth + 1) if rest else {})
        if "allOf" in s:
            out = {k: v for k, v in s.items() if k != "allOf"}
            for sub in s["allOf"]:
                out = self.merge(out, self.flatten(sub, depth + 1))
            return out
        return s

    def merge(self, a, b):
        out = dict(a)
        for k, v in b.items():
            if k == "properties" and k in out:
                props = dict(out[k])
                for pk, pv in v.items():
                    props[pk] = {"allOf": [props[pk], pv]} if pk in props else pv
                out[k] = props
            elif k == "required" and k in out:
                out[k] = list(dict.fromkeys(list(out[k]) + list(v)))
            elif k == "type" and k in out:
                ta = out[k] if isinstance(out[k], list) else [out[k]]
                tb = v if isinstance(v, list) else [v]
                both = [t for t in ta if t in tb or (t == "integer" and "number" in tb)]
                both += [t for t in tb if t == "integer" and "number" in ta and t not in both]
                out[k] = both or ta
            elif k not in out:
                out[k] = v
        return out

    def gen(self, s, depth=0):
        s = self.flatten(s)
        for key in ("oneOf", "anyOf"):
            if key in s:
                rest = {k: v for k, v in s.items() if k != key}
                branch = self.rng.choice(s[key])
                return self.gen({"allOf": [rest, branch]}, depth + 1)
        if "const" in s:
            return s["const"]
        if "enum" in s:
            return self.rng.choice(s["enum"])
        types = s.get("type")
        if types is None:
            types = []
            if any(k in s for k in ("properties", "required", "additionalProperties",
                                    "patternProperties", "minProperties", "maxProperties")):
                types.append("object")
            if any(k in s for k in ("items", "prefixItems", "additionalItems", "minItems",
                                    "maxItems")):
                types.append("array")
            if any(k in s for k in ("minLength", "maxLength", "pattern", "format")):
                types.append("string")
            if any(k in s for k in ("minimum", "maximum", "exclusiveMinimum",
                                    "exclusiveMaximum")):
                types.append("number")
            if not types:
                types = ["null", "boolean", "integer", "number", "string", "array", "object"]
        elif isinstance(types, str):
            types = [types]
        t = self.rng.choice(types)
        return getattr(self, "gen_" + t.replace("-", "_"))(s, depth)

    def gen_null(self, s, depth):
        return None

    def gen_boolean(self, s, depth):
        return self.rng.random() < 0.5

    def _bounds(self, s):
        lo, hi = s.get("minimum"), s.get("maximum")
        elo, ehi = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
        lo_x = hi_x = False
        if elo is True:
            lo_x = True
        elif isinstance(elo, (int, float)) and not isinstance(elo, bool):
            lo, lo_x = elo, True
        if ehi is True:
            hi_x = True
        elif isinstance(ehi, (int, float)) and not isinstance(ehi, bool):
            hi, hi_x = ehi, True
        return lo, lo_x, hi, hi_x

    def gen_integer(self, s, depth):
        lo, lo_x, hi, hi_x = self._bounds(s)
        import math
        a = -10**6 if lo is None else math.floor(lo) + 1 if lo_x else math.ceil(lo)
        b = 10**6 if hi is None else math.ceil(hi) - 1 if hi_x else math.floor(hi)
        if lo is not None and hi is None:
            b = a + 10**6
        if hi is not None and lo is None:
            a = b - 10**6
        if a > b:
            raise Skip("empty range")
        return self.rng.choice([a, b, self.rng.randint(a, b)])

    def gen_number(self, s, depth):
        if self.rng.random() < 0.3:
            return self.gen_integer(s, depth)
        lo, lo_x, hi, hi_x = self._bounds(s)
        a = -1e6 if lo is None else float(lo)
        b = 1e6 if hi is None else float(hi)
        if lo is not None and hi is None:
            b = a + 1e6
        if hi is not None and lo is None:
            a = b - 1e6
        x = self.rng.uniform(a, b)
        if self.rng.random() < 0.5:
            x = round(x, 3)
        return x

    def gen_string(self, s, depth):
        lo = s.get("minLength", 0)
        hi = s.get("maxLength", lo + 8)
        if "pattern" in s:
            text = regex_sample(s["pattern"], self.rng)
        elif s.get("format") in FORMATS:
            text = FORMATS[s["format"]](self.rng)
        else:
            n = self.rng.randint(lo, max(lo, min(hi, lo + 8)))
            text = "".join(self.rng.choice(ALPHABET) for _ in range(n))
        return text

    def gen_array(self, s, depth):
        if "prefixItems" in s:
            prefix, rest = s["prefixItems"], s.get("items", True)
        elif isinstance(s.get("items"), list):
            prefix, rest = s["items"], s.get("additionalItems", True)
        else:
            prefix, rest = [], s.get("items", True)
        lo = s.get("minItems", 0)
        hi = s.get("maxItems", lo + (0 if depth > 4 else 3))
        n = self.rng.randint(lo, max(lo, min(hi, lo + 3)))
        out = []
        for i in range(n):
            sub = prefix[i] if i < len(prefix) else rest
            if sub is False:
                break
            out.append(self.gen(sub, depth + 1))
        return out

    def gen_object(self, s, depth):
        props = s.get("properties", {})
        required = s.get("required", [])
        out = {}
        for k, v in props.items():
            if v is False:
                continue
            if k in required or (depth < 4 and self.rng.random() < 0.5):
                out[k] = self.gen(v, depth + 1)
        for k in required:
            if k not in out:
                pats = s.get("patternProperties", {})
                import re
                sub = next((pv for p, pv in pats.items() if re.search(p, k)),
                           s.get("additionalProperties", True))
                out[k] = self.gen(sub, depth + 1)
        pats = s.get("patternProperties", {})
        extra = s.get("additionalProperties")
        n_free = self.rng.randint(s.get("minProperties", 0) and 1, 2) if depth < 4 else 0
        for _ in range(n_free):
            if len(pats) == 1:
                (p, sub), = pats.items()
                key = regex_sample(p, self.rng)
            elif not pats and extra not in (None, False):
                key = "x" + "".join(self.rng.choice(ALPHABET) for _ in range(4))
                sub = True if extra is True else extra
            else:
                break
            if key in props or key in out:
                continue
            out[key] = self.gen(sub, depth + 1)
        return out


def candidates(schema, rng, n):
    """Up to n candidate documents (Python values) for `schema`."""
    g = Generator(schema, rng)
    out = []
    for _ in range(n * 3):
        if len(out) >= n:
            break
        try:
            out.append(g.gen(schema))
        except (Skip, RecursionError, KeyError, TypeError, ValueError, IndexError,
                AttributeError):
            continue
    return out
