/* triehh_beam_siphash: SipHash-2-4 of every message of a batch in one call, over Arrow's layout
 * (a data buffer and int32 or int64 offsets), for triehh_beam.protocol.keyed_hash. The numpy code
 * there is the reference this must equal bit for bit, and the fallback when this module was not
 * built. Only the CPython C API and the buffer protocol: no numpy headers, no other library.
 * The hashing loop runs without the GIL. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                                              \
    do {                                                                                      \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                             \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                                \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                                \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                             \
    } while (0)

/* A little-endian 64-bit word from 8 bytes, on any host (compilers make it one load on x86). */
static inline uint64_t load_le64(const unsigned char *p) {
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 24) |
           ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) | ((uint64_t)p[6] << 48) |
           ((uint64_t)p[7] << 56);
}

static uint64_t siphash24(uint64_t k0, uint64_t k1, const unsigned char *m, size_t len) {
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
    uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
    uint64_t v3 = k1 ^ 0x7465646279746573ULL;
    const unsigned char *end = m + (len - len % 8);
    for (; m != end; m += 8) {
        uint64_t w = load_le64(m);
        v3 ^= w;
        SIPROUND;
        SIPROUND;
        v0 ^= w;
    }
    /* The last word: the tail bytes, and the length mod 256 in the top byte. */
    uint64_t b = ((uint64_t)len) << 56;
    switch (len & 7) {
    case 7: b |= ((uint64_t)m[6]) << 48; /* fall through */
    case 6: b |= ((uint64_t)m[5]) << 40; /* fall through */
    case 5: b |= ((uint64_t)m[4]) << 32; /* fall through */
    case 4: b |= ((uint64_t)m[3]) << 24; /* fall through */
    case 3: b |= ((uint64_t)m[2]) << 16; /* fall through */
    case 2: b |= ((uint64_t)m[1]) << 8;  /* fall through */
    case 1: b |= ((uint64_t)m[0]); break;
    case 0: break;
    }
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* The offsets' width (4 or 8) from a buffer's format, or 0 when it is not a native signed
 * 32- or 64-bit integer. */
static int offset_width(const Py_buffer *view) {
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=') f++;
    if (f[0] == '\0' || f[1] != '\0') return 0;
    if ((f[0] == 'i' || f[0] == 'l' || f[0] == 'q') && (view->itemsize == 4 || view->itemsize == 8))
        return (int)view->itemsize;
    return 0;
}

/* Hashes message i = data[offsets[i]:offsets[i + 1]] into out[i]; returns the first i whose
 * offsets are not 0 <= start <= end <= data_len, or -1 when all are. */
#define HASH_ALL(OFFSET_T)                                                                    \
    do {                                                                                      \
        const OFFSET_T *off = (const OFFSET_T *)offsets_view.buf;                             \
        for (Py_ssize_t i = 0; i < n; i++) {                                                  \
            int64_t start = (int64_t)off[i], end = (int64_t)off[i + 1];                       \
            if (start < 0 || end < start || end > (int64_t)data_view.len) {                   \
                bad = i;                                                                      \
                break;                                                                        \
            }                                                                                 \
            out[i] = siphash24(k0, k1, data + start, (size_t)(end - start));                  \
        }                                                                                     \
    } while (0)

PyDoc_STRVAR(siphash24_batch_doc,
"siphash24_batch(k0, k1, data, offsets, out)\n--\n\n"
"SipHash-2-4 under the key (k0, k1) of message i = data[offsets[i]:offsets[i + 1]] into out[i],\n"
"for every i < len(offsets) - 1.\n\n"
"k0, k1: the key's two halves, integers in [0, 2**64). data: any contiguous bytes-like\n"
"buffer. offsets: a contiguous buffer of native int32 or int64. out: a writable contiguous\n"
"buffer of len(offsets) - 1 eight-byte items (a numpy uint64 array), written in the host's\n"
"byte order.\n\n"
"Raises TypeError for buffers of the wrong kind or size, ValueError for offsets outside data\n"
"or decreasing, OverflowError for a key half outside [0, 2**64).");

static PyObject *siphash24_batch(PyObject *self, PyObject *args) {
    PyObject *k0_obj, *k1_obj, *data_obj, *offsets_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOOO:siphash24_batch", &k0_obj, &k1_obj, &data_obj, &offsets_obj, &out_obj))
        return NULL;
    uint64_t k0 = (uint64_t)PyLong_AsUnsignedLongLong(k0_obj);
    if (PyErr_Occurred()) return NULL;
    uint64_t k1 = (uint64_t)PyLong_AsUnsignedLongLong(k1_obj);
    if (PyErr_Occurred()) return NULL;

    Py_buffer data_view, offsets_view, out_view;
    if (PyObject_GetBuffer(data_obj, &data_view, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(offsets_obj, &offsets_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&data_view);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &out_view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&offsets_view);
        PyBuffer_Release(&data_view);
        return NULL;
    }
    PyObject *result = NULL;
    int width = offset_width(&offsets_view);
    Py_ssize_t n_offsets = width ? offsets_view.len / width : 0;
    Py_ssize_t n = n_offsets > 0 ? n_offsets - 1 : 0;
    if (!width) {
        PyErr_SetString(PyExc_TypeError, "offsets must be a contiguous buffer of native int32 or int64");
        goto done;
    }
    if (out_view.itemsize != 8 || out_view.len != n * 8) {
        PyErr_Format(PyExc_TypeError, "out must hold %zd eight-byte items (one per message)", n);
        goto done;
    }
    const unsigned char *data = (const unsigned char *)data_view.buf;
    uint64_t *out = (uint64_t *)out_view.buf;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    if (width == 4)
        HASH_ALL(int32_t);
    else
        HASH_ALL(int64_t);
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError,
                     "offsets %zd and %zd do not delimit a message of a %zd-byte buffer "
                     "(offsets must be non-decreasing and within the data)",
                     bad, bad + 1, data_view.len);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&out_view);
    PyBuffer_Release(&offsets_view);
    PyBuffer_Release(&data_view);
    return result;
}

static PyMethodDef methods[] = {
    {"siphash24_batch", siphash24_batch, METH_VARARGS, siphash24_batch_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "triehh_beam_siphash",
    "SipHash-2-4 of a batch of messages in Arrow's layout, in one call (triehh_beam.protocol.keyed_hash).",
    0,
    methods,
};

PyMODINIT_FUNC PyInit_triehh_beam_siphash(void) { return PyModuleDef_Init(&module); }
