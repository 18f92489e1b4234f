/* The receiver's optional accelerator: a SkyWalking v3 SegmentObject's bytes
 * read into the spans ``spans.py`` declares, in one pass, checked by the
 * rules of ``spans.SegmentRules``: its limits come with each call, the
 * constants it checks by once, when ``spans.py`` binds it.
 *
 * ``scan`` answers only for a segment it can take whole: one that decodes
 * plainly and passes every rule. For anything else (a rule broken, bytes it
 * does not read, a string that is not UTF-8) it answers None, and the caller
 * takes the pure-Python path, which decodes the same bytes with protobuf and
 * says what was wrong. The result is then the same either way;
 * ``tests/unit/test_scan.py`` asserts so over random and real-agent segments.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#define MAX_SEARCHABLE_KEYS 64
#define MAX_DETAIL_KEYS 16
#define MAX_DETAILS 32 /* a span with more is left to the pure-Python path */

typedef struct {
    const uint8_t *p, *end;
} Reader;

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} Slice;

typedef struct {
    Py_ssize_t max_spans, max_refs, max_tags, max_name;
    __int128 earliest, latest;
    Slice keys[MAX_SEARCHABLE_KEYS];
    Py_ssize_t nkeys;
    Slice detail_keys[MAX_DETAIL_KEYS];
    Py_ssize_t ndetail_keys;
} Rules;

static PyTypeObject *span_type, *ref_type;

/* Set by ``bind``: the longest searchable ``key=value``, and how many span
 * kinds, span layers and reference types there are (each numbered from 0). */
static Py_ssize_t max_tag_chars;
static long long span_kinds, span_layers, ref_types;

/* Reading the wire format; each returns 0 on bytes it does not read. */

static int read_varint(Reader *r, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && r->p < r->end; shift += 7) {
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

static int read_bytes(Reader *r, Slice *out) {
    uint64_t n;
    if (!read_varint(r, &n) || n > (uint64_t)(r->end - r->p))
        return 0;
    out->p = r->p;
    out->n = (Py_ssize_t)n;
    r->p += n;
    return 1;
}

static int skip(Reader *r, uint64_t wire_type) {
    uint64_t ignored;
    Slice s;
    switch (wire_type) {
    case 0:
        return read_varint(r, &ignored);
    case 1:
        if (r->end - r->p < 8)
            return 0;
        r->p += 8;
        return 1;
    case 2:
        return read_bytes(r, &s);
    case 5:
        if (r->end - r->p < 4)
            return 0;
        r->p += 4;
        return 1;
    default: /* groups: left to protobuf */
        return 0;
    }
}

/* A field's number and wire type; 0 at the end of the message or on bytes it
 * does not read (``*ok`` says which). */
static uint64_t next_field(Reader *r, uint64_t *wire_type, int *ok) {
    uint64_t key;
    *ok = 1;
    if (r->p >= r->end)
        return 0;
    if (!read_varint(r, &key) || (key >> 3) == 0) {
        *ok = 0;
        return 0;
    }
    *wire_type = key & 7;
    return key >> 3;
}

/* The rules on a name: at most ``max_name`` characters, none of them a
 * control character (model.checks.CONTROL_CHARACTERS). In UTF-8 those are
 * single bytes no other character contains, and characters are the bytes
 * that do not continue one. */
static int name_passes(const Rules *rules, Slice s, int required) {
    Py_ssize_t chars = 0;
    if (required && s.n == 0)
        return 0;
    for (Py_ssize_t i = 0; i < s.n; i++) {
        uint8_t b = s.p[i];
        if (b < 0x20 || b == 0x7f)
            return 0;
        chars += (b & 0xc0) != 0x80;
    }
    return chars <= rules->max_name;
}

static PyObject *text(Slice s) { return PyUnicode_DecodeUTF8((const char *)s.p, s.n, NULL); }

/* A tuple of ``type`` (a named tuple) holding ``n`` items, set by the caller. */
static PyObject *named(PyTypeObject *type, Py_ssize_t n) { return type->tp_alloc(type, n); }

static PyObject *scan_ref(const Rules *rules, Slice body) {
    Reader r = {body.p, body.p + body.n};
    uint64_t wire_type, v, field;
    int ok;
    long long ref_kind = 0;
    Slice names[4] = {{NULL, 0}, {NULL, 0}, {NULL, 0}, {NULL, 0}};
    while ((field = next_field(&r, &wire_type, &ok))) {
        if (field == 1 && wire_type == 0) {
            if (!read_varint(&r, &v))
                return Py_None;
            ref_kind = (int32_t)(uint32_t)v;
        } else if (field >= 5 && field <= 8 && wire_type == 2) {
            if (!read_bytes(&r, &names[field - 5]))
                return Py_None;
        } else if (!skip(&r, wire_type))
            return Py_None;
    }
    if (!ok || ref_kind < 0 || ref_kind >= ref_types)
        return Py_None;
    for (int i = 0; i < 4; i++)
        if (!name_passes(rules, names[i], 0))
            return Py_None;
    PyObject *ref = named(ref_type, 5);
    if (ref == NULL)
        return NULL;
    PyTuple_SET_ITEM(ref, 0, PyLong_FromLongLong(ref_kind));
    for (int i = 0; i < 4; i++) {
        PyObject *name = text(names[i]);
        if (name == NULL) {
            Py_DECREF(ref);
            return NULL;
        }
        PyTuple_SET_ITEM(ref, i + 1, name);
    }
    return ref;
}

/* The key and value of a KeyStringValuePair. */
static int read_pair(Slice body, Slice *key, Slice *value) {
    Reader r = {body.p, body.p + body.n};
    uint64_t wire_type, field;
    int ok;
    key->n = value->n = 0;
    key->p = value->p = body.p;
    while ((field = next_field(&r, &wire_type, &ok))) {
        if ((field == 1 || field == 2) && wire_type == 2) {
            if (!read_bytes(&r, field == 1 ? key : value))
                return 0;
        } else if (!skip(&r, wire_type))
            return 0;
    }
    return ok;
}

static int among(const Slice *keys, Py_ssize_t n, Slice key) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (keys[i].n == key.n && memcmp(keys[i].p, key.p, key.n) == 0)
            return 1;
    return 0;
}

/* Adds ``key=value`` to ``tags`` when the key is searchable and the whole is
 * short enough to be searched by (spans.searchable_tags). */
static int add_tag(const Rules *rules, Slice key, Slice value, PyObject *tags) {
    if (!among(rules->keys, rules->nkeys, key))
        return 1;
    PyObject *k = text(key), *v = k ? text(value) : NULL;
    PyObject *tag = v ? PyUnicode_FromFormat("%U=%U", k, v) : NULL;
    Py_XDECREF(k);
    Py_XDECREF(v);
    if (tag == NULL)
        return -1;
    int failed = PyUnicode_GET_LENGTH(tag) <= max_tag_chars && PySet_Add(tags, tag) < 0;
    Py_DECREF(tag);
    return failed ? -1 : 1;
}

typedef struct {
    long long kind, layer, start, end, component;
    int is_error, skip_analysis;
    Slice operation, peer;
    Py_ssize_t nrefs, ntags, ndetails;
    Slice details[MAX_DETAILS][2]; /* the key and value of each tag of a detail key */
} SpanFields;

/* One span's fields, its references counted and its tags searched; 0 when
 * it is not one ``scan`` takes, -1 on a Python error. */
static int read_span(const Rules *rules, Slice body, SpanFields *s, PyObject *tags) {
    Reader r = {body.p, body.p + body.n};
    uint64_t wire_type, v, field;
    int ok, added;
    Slice ignored, key, value;
    memset(s, 0, offsetof(SpanFields, details));
    while ((field = next_field(&r, &wire_type, &ok))) {
        if (wire_type == 0 && (field == 3 || field == 4 || field == 8 || field == 9 || field == 10 ||
                               field == 11 || field == 14)) {
            if (!read_varint(&r, &v))
                return 0;
            switch (field) {
            case 3: s->start = (int64_t)v; break;
            case 4: s->end = (int64_t)v; break;
            case 8: s->kind = (int32_t)(uint32_t)v; break;
            case 9: s->layer = (int32_t)(uint32_t)v; break;
            case 10: s->component = (int32_t)(uint32_t)v; break;
            case 11: s->is_error = v != 0; break;
            default: s->skip_analysis = v != 0;
            }
        } else if (wire_type == 2 && (field == 5 || field == 6 || field == 7 || field == 12)) {
            if (!read_bytes(&r, field == 6 ? &s->operation : field == 7 ? &s->peer : &ignored))
                return 0;
            if (field == 5)
                s->nrefs++;
            else if (field == 12) {
                s->ntags++;
                if (!read_pair(ignored, &key, &value))
                    return 0;
                if ((added = add_tag(rules, key, value, tags)) <= 0)
                    return added;
                if (among(rules->detail_keys, rules->ndetail_keys, key)) {
                    if (s->ndetails == MAX_DETAILS)
                        return 0;
                    s->details[s->ndetails][0] = key;
                    s->details[s->ndetails++][1] = value;
                }
            }
        } else if (!skip(&r, wire_type))
            return 0;
    }
    return ok && s->kind >= 0 && s->kind < span_kinds && s->layer >= 0 && s->layer < span_layers &&
           rules->earliest <= s->start && s->start <= s->end && s->end <= rules->latest &&
           s->nrefs <= rules->max_refs && s->ntags <= rules->max_tags &&
           name_passes(rules, s->operation, 0) && name_passes(rules, s->peer, 0);
}

/* The references of a span read by ``read_span``, as a tuple of SpanRef. */
static PyObject *span_refs(const Rules *rules, Slice body, Py_ssize_t nrefs) {
    Reader r = {body.p, body.p + body.n};
    uint64_t wire_type, field;
    int ok;
    Slice ref_body;
    PyObject *refs = PyTuple_New(nrefs);
    Py_ssize_t i = 0;
    if (refs == NULL || nrefs == 0)
        return refs;
    while ((field = next_field(&r, &wire_type, &ok))) {
        if (field == 5 && wire_type == 2) {
            PyObject *ref = read_bytes(&r, &ref_body) ? scan_ref(rules, ref_body) : Py_None;
            if (ref == NULL || ref == Py_None) {
                Py_DECREF(refs);
                return ref;
            }
            PyTuple_SET_ITEM(refs, i++, ref);
        } else
            skip(&r, wire_type);
    }
    return refs;
}

/* The (key, value) pairs of a span's detail tags, in their order. */
static PyObject *span_details(const SpanFields *s) {
    PyObject *details = PyTuple_New(s->ndetails);
    for (Py_ssize_t i = 0; details != NULL && i < s->ndetails; i++) {
        PyObject *k = text(s->details[i][0]), *v = k ? text(s->details[i][1]) : NULL;
        PyObject *pair = v ? PyTuple_Pack(2, k, v) : NULL;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (pair == NULL)
            Py_CLEAR(details);
        else
            PyTuple_SET_ITEM(details, i, pair);
    }
    return details;
}

static PyObject *span_of(const Rules *rules, Slice body, PyObject *tags) {
    SpanFields s;
    int read = read_span(rules, body, &s, tags);
    if (read <= 0)
        return read < 0 ? NULL : Py_None;
    PyObject *refs = span_refs(rules, body, s.nrefs);
    if (refs == NULL || refs == Py_None)
        return refs;
    PyObject *operation = text(s.operation), *peer = operation ? text(s.peer) : NULL;
    PyObject *details = peer ? span_details(&s) : NULL;
    PyObject *span = details ? named(span_type, 12) : NULL;
    if (span == NULL) {
        Py_XDECREF(operation);
        Py_XDECREF(peer);
        Py_XDECREF(details);
        Py_DECREF(refs);
        return NULL;
    }
    PyTuple_SET_ITEM(span, 0, PyLong_FromLongLong(s.kind));
    PyTuple_SET_ITEM(span, 1, PyLong_FromLongLong(s.layer));
    PyTuple_SET_ITEM(span, 2, PyLong_FromLongLong(s.start));
    PyTuple_SET_ITEM(span, 3, PyLong_FromLongLong(s.end));
    PyTuple_SET_ITEM(span, 4, operation);
    PyTuple_SET_ITEM(span, 5, peer);
    PyTuple_SET_ITEM(span, 6, PyBool_FromLong(s.is_error));
    PyTuple_SET_ITEM(span, 7, PyBool_FromLong(s.skip_analysis));
    PyTuple_SET_ITEM(span, 8, refs);
    PyTuple_SET_ITEM(span, 9, PyLong_FromSsize_t(s.ntags));
    PyTuple_SET_ITEM(span, 10, PyLong_FromLongLong(s.component));
    PyTuple_SET_ITEM(span, 11, details);
    return span;
}

/* The segment's four names and its spans' bodies; 0 when it is not one
 * ``scan`` takes, -1 when memory ran out. */
static int read_segment(const Rules *rules, Reader *r, Slice names[4], Slice **spans, Py_ssize_t *nspans) {
    uint64_t wire_type, field;
    int ok;
    Py_ssize_t room = 0;
    while ((field = next_field(r, &wire_type, &ok))) {
        Slice *into = NULL;
        if (wire_type == 2 && field == 3) {
            if (*nspans == rules->max_spans)
                return 0;
            if (*nspans == room) {
                room = room ? 2 * room : 8;
                Slice *grown = PyMem_Realloc(*spans, sizeof(Slice) * (size_t)room);
                if (grown == NULL)
                    return -1;
                *spans = grown;
            }
            into = &(*spans)[(*nspans)++];
        } else if (wire_type == 2 && (field == 1 || field == 2))
            into = &names[field - 1];
        else if (wire_type == 2 && (field == 4 || field == 5))
            into = &names[field - 2];
        if (into ? !read_bytes(r, into) : !skip(r, wire_type))
            return 0;
    }
    if (!ok || *nspans == 0)
        return 0;
    for (int i = 0; i < 4; i++)
        if (!name_passes(rules, names[i], 1))
            return 0;
    return 1;
}

static PyObject *sorted_tuple(PyObject *set) {
    PyObject *list = PySequence_List(set);
    if (list == NULL || PyList_Sort(list) < 0) {
        Py_XDECREF(list);
        return NULL;
    }
    PyObject *tuple = PyList_AsTuple(list);
    Py_DECREF(list);
    return tuple;
}

static PyObject *segment_of(const Rules *rules, Reader *r) {
    Slice names[4] = {{NULL, 0}, {NULL, 0}, {NULL, 0}, {NULL, 0}};
    Py_ssize_t nspans = 0;
    Slice *bodies = NULL;
    PyObject *result = NULL, *spans = NULL, *tags = NULL, *ids[4] = {NULL, NULL, NULL, NULL};
    int read = read_segment(rules, r, names, &bodies, &nspans);
    if (read <= 0) {
        result = read < 0 ? PyErr_NoMemory() : Py_NewRef(Py_None);
        goto done;
    }
    if ((spans = PyTuple_New(nspans)) == NULL || (tags = PySet_New(NULL)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < nspans; i++) {
        PyObject *span = span_of(rules, bodies[i], tags);
        if (span == NULL || span == Py_None) {
            result = Py_XNewRef(span);
            goto done;
        }
        PyTuple_SET_ITEM(spans, i, span);
    }
    for (int i = 0; i < 4; i++)
        if ((ids[i] = text(names[i])) == NULL)
            goto done;
    PyObject *sorted = sorted_tuple(tags);
    if (sorted == NULL)
        goto done;
    result = PyTuple_Pack(6, ids[0], ids[1], ids[2], ids[3], spans, sorted);
    Py_DECREF(sorted);
done:
    PyMem_Free(bodies);
    for (int i = 0; i < 4; i++)
        Py_XDECREF(ids[i]);
    Py_XDECREF(spans);
    Py_XDECREF(tags);
    if (result == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear(); /* not UTF-8: protobuf says so */
        result = Py_NewRef(Py_None);
    }
    return result;
}

PyDoc_STRVAR(scan_doc,
             "scan(data, rules, now_ms) -> (trace_id, segment_id, service, instance, spans, tags) | None\n\n"
             "The segment ``data`` encodes, read and checked in one pass; None when it\n"
             "breaks a rule or holds what only protobuf reads. ``rules`` is\n"
             "(max_spans, max_refs, max_tags, max_name, max_past_ms, max_future_ms,\n"
             "searchable keys as UTF-8 bytes, detail keys as UTF-8 bytes).");

/* The bytes of ``given`` (a tuple) as slices: 1, 0 when more than ``most``,
 * -1 when one is not bytes. */
static int read_keys(PyObject *given, Slice *into, Py_ssize_t most, Py_ssize_t *n) {
    *n = PyTuple_GET_SIZE(given);
    if (*n > most)
        return 0;
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *key = PyTuple_GET_ITEM(given, i);
        if (!PyBytes_Check(key))
            return -1;
        into[i].p = (const uint8_t *)PyBytes_AS_STRING(key);
        into[i].n = PyBytes_GET_SIZE(key);
    }
    return 1;
}

static PyObject *scan(PyObject *module, PyObject *args) {
    Py_buffer data;
    PyObject *keys, *detail_keys;
    long long max_past, max_future, now_ms;
    Rules rules;
    if (span_type == NULL)
        return PyErr_Format(PyExc_RuntimeError, "bind(Span, SpanRef, constants) first");
    if (!PyArg_ParseTuple(args, "y*(nnnnLLO!O!)L", &data, &rules.max_spans, &rules.max_refs, &rules.max_tags,
                          &rules.max_name, &max_past, &max_future, &PyTuple_Type, &keys, &PyTuple_Type,
                          &detail_keys, &now_ms))
        return NULL;
    int read = read_keys(keys, rules.keys, MAX_SEARCHABLE_KEYS, &rules.nkeys);
    if (read > 0)
        read = read_keys(detail_keys, rules.detail_keys, MAX_DETAIL_KEYS, &rules.ndetail_keys);
    if (read <= 0) {
        PyBuffer_Release(&data);
        return read < 0 ? PyErr_Format(PyExc_TypeError, "the keys of the rules must be bytes") : Py_NewRef(Py_None);
    }
    rules.earliest = (__int128)now_ms - max_past;
    rules.latest = (__int128)now_ms + max_future;
    Reader r = {data.buf, (const uint8_t *)data.buf + data.len};
    PyObject *result = segment_of(&rules, &r);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *bind(PyObject *module, PyObject *args) {
    PyObject *span, *ref;
    Py_ssize_t tag_chars;
    long long kinds, layers, refs;
    if (!PyArg_ParseTuple(args, "O!O!(nLLL)", &PyType_Type, &span, &PyType_Type, &ref, &tag_chars, &kinds, &layers,
                          &refs))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)span, &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)ref, &PyTuple_Type))
        return PyErr_Format(PyExc_TypeError, "Span and SpanRef must be named tuples");
    Py_XSETREF(span_type, (PyTypeObject *)Py_NewRef(span));
    Py_XSETREF(ref_type, (PyTypeObject *)Py_NewRef(ref));
    max_tag_chars = tag_chars;
    span_kinds = kinds;
    span_layers = layers;
    ref_types = refs;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, scan_doc},
    {"bind", bind, METH_VARARGS,
     "bind(Span, SpanRef, (max_tag_chars, span_kinds, span_layers, ref_types)): the named tuples ``scan``\n"
     "builds, and the constants it checks by."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT, .m_name = "skyoap.receiver._scan", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
