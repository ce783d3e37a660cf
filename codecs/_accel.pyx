# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twins of the hottest pure codec functions (optional; see :mod:`.accel`).

Every function here has a pure-Python twin of the same name, the reference. A twin
handles the input real traffic carries and hands anything else to the pure function
(registered by :func:`set_pure`): a fault, an unusual spelling, a type it does not
know. So the compiled path returns only what the pure path would return for the same
input, and every error is the pure path's own error, message included. The
differential tests (``tests/codecs/test_accel.py``) check it.

Not imported directly: :mod:`trocket.codecs.accel` picks the implementation.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_GetItemWithError, PyDict_New, PyDict_SetItem
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.object cimport PyObject
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE, PyBUF_SIMPLE
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_AsUTF8String
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from libc.string cimport memchr, memcmp, memcpy

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    dict _PyDict_NewPresized(Py_ssize_t minused)
    bint PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    const unsigned char* PyUnicode_1BYTE_DATA(object o)
    bint PyDict_Next(object d, Py_ssize_t* pos, PyObject** key, PyObject** value)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size) except NULL
    PyObject* PyDict_GetItemWithError(object d, object key) except? NULL

import zlib

cimport cython

from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
# (the pure builder: this module is imported from the command module's last lines, before
# its name is rebound to the twin below)
from trocket.codecs.command import build_command as _py_build_command
from trocket.codecs.errors import FrameError, FrameTooLargeError, NotRocketMQError, TruncatedFrameError

#: Bumped whenever a twin's contract changes; :mod:`.accel` refuses a build whose ABI
#: differs from its own (a stale ``.so`` left by an older editable install).
ABI = 28

cdef object _py_decode_command = None
cdef object _py_FrameDecoder = None
cdef object _sniff_foreign_protocol = None
cdef object _py_decode_binary_header = None
cdef object _py_decode_json_header = None
cdef object _py_decode_send_message = None
cdef object _py_decode_send_message_v2 = None
cdef object _py_encode_record_into = None
cdef object _py_get_property = None
cdef object _py_decode_properties = None
cdef object _py_send_properties = None
cdef object _py_encode_record_batch = None
cdef object _py_decode_send_fields = None
cdef object _py_command_send_fields = None
cdef object _py_place_record = None
cdef object _py_encode_store_record = None
cdef object _py_dispatch_fields = None
cdef object _py_encode_send_ok = None
cdef object _py_offset_msg_id = None
cdef object _py_encode_binary_header = None
cdef object _py_encode_json_header = None
cdef object _py_encode_send_message_v2 = None
cdef object _py_encode_pull_message = None
cdef object _py_java_string_hash = None
cdef object _py_index_records = None
cdef object _py_signature_matches = None
cdef object _py_send_signature_matches = None
cdef object _py_hashmap_properties = None
cdef object _py_without_properties_bytes = None
cdef object _py_encode_command = None
cdef object _py_specialize_codec = None
cdef object _wire_ext_fields = None
cdef dict _header_wire = None  # header class -> its codec's encode_wire (custom_header's table)
cdef object _fast_codes = None  # the classes Java encodes as FastCodesHeader (their fields first)


def set_pure(str name, fn):
    """Register the pure function ``name`` hands over to."""
    global _py_decode_command, _py_decode_binary_header, _py_decode_json_header
    global _py_FrameDecoder, _sniff_foreign_protocol
    global _py_decode_send_message, _py_decode_send_message_v2, _py_encode_record_into, _py_get_property
    global _py_decode_properties, _py_encode_record_batch, _py_decode_send_fields, _py_place_record
    global _py_encode_store_record
    global _py_send_properties
    global _py_dispatch_fields
    global _py_encode_send_ok, _py_offset_msg_id, _py_encode_binary_header, _py_encode_json_header
    global _py_encode_send_message_v2, _py_encode_pull_message
    global _py_java_string_hash, _py_index_records, _py_signature_matches, _py_hashmap_properties
    global _py_send_signature_matches
    global _py_without_properties_bytes, _py_encode_command, _wire_ext_fields, _py_specialize_codec
    global _py_command_send_fields
    if name == "FrameDecoder":
        _py_FrameDecoder = fn
        from trocket.codecs.frame import sniff_foreign_protocol
        _sniff_foreign_protocol = sniff_foreign_protocol
    elif name == "decode_command":
        _py_decode_command = fn
    elif name == "decode_binary_header":
        _py_decode_binary_header = fn
    elif name == "decode_json_header":
        _py_decode_json_header = fn
    elif name == "encode_json_header":
        _py_encode_json_header = fn
    elif name == "decode_send_message":
        _py_decode_send_message = fn
    elif name == "decode_send_message_v2":
        _py_decode_send_message_v2 = fn
    elif name == "encode_record_into":
        _py_encode_record_into = fn
    elif name == "get_property":
        _py_get_property = fn
    elif name == "decode_properties":
        _py_decode_properties = fn
    elif name == "send_properties":
        _py_send_properties = fn
    elif name == "encode_record_batch":
        _py_encode_record_batch = fn
    elif name == "decode_send_fields":
        _py_decode_send_fields = fn
    elif name == "command_send_fields":
        _py_command_send_fields = fn
    elif name == "ext_fields_descriptor":
        pass  # (its pure function returns the slot's own descriptor: nothing to hand over)
    elif name == "place_record":
        _py_place_record = fn
    elif name == "encode_store_record":
        _py_encode_store_record = fn
    elif name == "dispatch_fields":
        _py_dispatch_fields = fn
    elif name == "encode_send_ok":
        _py_encode_send_ok = fn
    elif name == "offset_msg_id":
        _py_offset_msg_id = fn
    elif name == "encode_binary_header":
        _py_encode_binary_header = fn
    elif name == "encode_send_message_v2":
        _py_encode_send_message_v2 = fn
    elif name == "encode_pull_message":
        _py_encode_pull_message = fn
    elif name == "java_string_hash":
        _py_java_string_hash = fn
    elif name == "index_records":
        _py_index_records = fn
    elif name == "signature_matches":
        _py_signature_matches = fn
    elif name == "send_signature_matches":
        _py_send_signature_matches = fn
    elif name == "hashmap_properties":
        _py_hashmap_properties = fn
    elif name == "without_properties_bytes":
        _py_without_properties_bytes = fn
    elif name == "build_command":
        pass  # (imported above: the decoders need it before any set_pure call)
    elif name == "response_command":
        pass  # (builds as build_command does: no pure function to hand over to)
    elif name == "Reply":
        pass  # (a class of its own: nothing to hand over)
    elif name == "specialize_codec":
        _py_specialize_codec = fn
    elif name == "encode_command":
        _py_encode_command = fn
        from trocket.codecs.serialize import wire_ext_fields  # defined above its accelerated line
        _wire_ext_fields = wire_ext_fields
    else:
        raise KeyError(name)


cdef object _RC = RemotingCommand
cdef object _new = object.__new__
cdef object _JSON = SerializeType.JSON
cdef object _ROCKETMQ = SerializeType.ROCKETMQ
cdef object _JAVA = LanguageCode.JAVA
cdef tuple _LANGS = tuple(LanguageCode(i) for i in range(max(LanguageCode) + 1))
cdef dict _LANG_BY_NAME = {lang.name: lang for lang in LanguageCode}
cdef bytes _EMPTY = b""
#: Returned by the parsers instead of a result: hand the input to the pure function.
cdef object _FAIL = object()
cdef str SIGNATURE_KEY = "Signature"
cdef str UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


# RemotingCommand's fields are stored straight into its slots: the object allocated as
# object.__new__ does (tp_alloc: zeroed slots, tracked by the GC), each field's slot
# found once, at import, from its member descriptor. Attribute stores (a type lookup
# and a descriptor call each) made up most of a decoded command's cost. Only while the
# class is a plain slotted class whose slots are exactly its ten fields (no __setattr__
# to bypass); otherwise the stores go by attribute.
cdef extern from *:
    """
    #include "structmember.h"
    /* The object slot a member descriptor stores to; -1 when it is not a plain
       writable object slot. */
    static Py_ssize_t trocket_slot_offset(PyObject *descr) {
        PyMemberDef *m;
        if (Py_TYPE(descr) != &PyMemberDescr_Type) return -1;
        m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) return -1;
        return m->offset;
    }
    static PyObject *trocket_alloc(PyObject *type) {
        return ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    }
    /* Only on a fresh object (the slot still NULL): the reference is the slot's. */
    static inline void trocket_fill_slot(PyObject *obj, Py_ssize_t off, PyObject *v) {
        Py_INCREF(v);
        *(PyObject **)((char *)obj + off) = v;
    }
    """
    Py_ssize_t trocket_slot_offset(object descr)
    object trocket_alloc(object type)
    void trocket_fill_slot(object obj, Py_ssize_t off, object v)

#: RemotingCommand's fields, in the order of the slot offsets below
_FIELDS = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body",
           "custom_header", "serialize_type")
cdef Py_ssize_t _OFF_CODE, _OFF_LANG, _OFF_VERSION, _OFF_OPAQUE, _OFF_FLAG, _OFF_REMARK
cdef Py_ssize_t _OFF_EXT, _OFF_BODY, _OFF_HEADER, _OFF_STYPE
#: the slots are filled directly (see above)
cdef bint _SLOT_STORES = False


cdef _find_slots():
    global _SLOT_STORES, _OFF_CODE, _OFF_LANG, _OFF_VERSION, _OFF_OPAQUE, _OFF_FLAG
    global _OFF_REMARK, _OFF_EXT, _OFF_BODY, _OFF_HEADER, _OFF_STYPE
    cdef Py_ssize_t off
    if _RC.__setattr__ is not object.__setattr__ or _RC.__mro__ != (_RC, object):
        return
    if tuple(n for n in _RC.__slots__ if n != "__weakref__") != _FIELDS:
        return
    offsets = []
    for name in _FIELDS:
        off = trocket_slot_offset(_RC.__dict__[name])
        if off <= 0:
            return
        offsets.append(off)
    (_OFF_CODE, _OFF_LANG, _OFF_VERSION, _OFF_OPAQUE, _OFF_FLAG, _OFF_REMARK, _OFF_EXT, _OFF_BODY,
     _OFF_HEADER, _OFF_STYPE) = offsets
    _SLOT_STORES = True


_find_slots()


cdef inline object _make_command(object code, object lang, object version, object opaque, object flag,
                                 object remark, object ext, object body, object header, object stype):
    if not _SLOT_STORES:
        return _py_build_command(_RC, code, lang, version, opaque, flag, remark, ext, body, header, stype)
    cmd = trocket_alloc(_RC)
    trocket_fill_slot(cmd, _OFF_CODE, code)
    trocket_fill_slot(cmd, _OFF_LANG, lang)
    trocket_fill_slot(cmd, _OFF_VERSION, version)
    trocket_fill_slot(cmd, _OFF_OPAQUE, opaque)
    trocket_fill_slot(cmd, _OFF_FLAG, flag)
    trocket_fill_slot(cmd, _OFF_REMARK, remark)
    trocket_fill_slot(cmd, _OFF_EXT, ext)
    trocket_fill_slot(cmd, _OFF_BODY, body)
    trocket_fill_slot(cmd, _OFF_HEADER, header)
    trocket_fill_slot(cmd, _OFF_STYPE, stype)
    return cmd


cdef inline object _field(object cmd, Py_ssize_t off, str name):
    """A field of a command whose class is exactly RemotingCommand: from its slot when
    the slots are known and it is set, else by attribute (an unset one's AttributeError
    as the pure path raises it). A fetch by name was a fifth of an answer's encode."""
    cdef PyObject* p
    if _SLOT_STORES:
        p = (<PyObject**>((<char*><PyObject*>cmd) + off))[0]
        if p != NULL:
            return <object>p
    return getattr(cmd, name)


cdef inline object _decoded_command(int code, object lang, int version, int opaque, int flag,
                                    object remark, object ext, object stype):
    """A decoded header's command (its body set by the caller)."""
    return _make_command(code, lang, version, opaque, flag, remark, ext, _EMPTY, None, stype)


# -- ext fields decoded on first read -------------------------------------------------
#
# A send request's ext fields are read by the send processor alone, as its send fields
# (command_send_fields), unless something else asks (ACL, a hook, a test). So the header
# decoders (JSON and ROCKETMQ) leave a send request's ext fields undecoded: they check
# them as the dict's decode would (the same acceptance), read the send fields on the
# way, and keep both, and the text, in the slot as a _RawExt; RemotingCommand.ext_fields (_ExtFields, the slot's descriptor while the
# accelerator is on) makes the dict on the first read and keeps it in the slot, so every
# reader sees the dict the eager decode makes. Only while the slots are known
# (_SLOT_STORES) and the descriptor is installed (ext_fields_descriptor).

#: the descriptor is RemotingCommand's: decoders may leave ext fields undecoded
cdef bint _LAZY_EXT = False


@cython.final
@cython.freelist(8)
cdef class _RawExt:
    """A send request's extFields object, not yet made a dict: its JSON text (or, if
    ``binary``, its ROCKETMQ ext map), and the send fields read from it
    (:func:`_json_send_ext`, :func:`_binary_send_ext`; None: not read), of V2's keys
    (``v2``) or V1's."""
    cdef bytes data
    cdef object fields
    cdef bint v2
    cdef bint binary


cdef object _raw_ext_dict(_RawExt raw):
    """The dict the eager decode makes of ``raw``'s text."""
    cdef _Cursor c
    if raw.binary:
        ext = _binary_ext(<const unsigned char*>PyBytes_AS_STRING(raw.data), 0, PyBytes_GET_SIZE(raw.data))
        if ext is _FAIL:  # (as below)
            ext = _py_decode_binary_header(
                bytes(17) + PyBytes_GET_SIZE(raw.data).to_bytes(4, "big") + raw.data).ext_fields
        return ext
    c.p = <const unsigned char*>PyBytes_AS_STRING(raw.data)
    c.pos = 0
    c.end = PyBytes_GET_SIZE(raw.data)
    ext = _json_ext(&c)
    if ext is _FAIL or c.pos != c.end:  # (not after the check it passed: the reference decides)
        ext = _py_decode_json_header(b'{"extFields":' + raw.data + b"}").ext_fields
    return ext


cdef object _ext_of(object cmd):
    """``cmd.ext_fields`` of a RemotingCommand (or subclass) whose slot is set and holds
    a _RawExt: the dict made and kept in the slot."""
    cdef PyObject** slot = <PyObject**>((<char*><PyObject*>cmd) + _OFF_EXT)
    cdef PyObject* old
    raw = <_RawExt>slot[0]  # (a reference of its own while the dict is made)
    ext = _raw_ext_dict(raw)
    old = slot[0]
    if old != <PyObject*>raw:  # (set by another thread meanwhile, through the reference path)
        return getattr(cmd, "ext_fields")
    Py_INCREF(ext)
    slot[0] = <PyObject*>ext
    Py_DECREF(<object>old)
    return ext


cdef object _raw_send_ext(const unsigned char* p, Py_ssize_t n, PyObject** v, bint v2, bint binary, bint read):
    """The _RawExt of the ext fields ``p[:n]``, and, if ``read``, of their send fields
    ``v`` (when they check)."""
    cdef _RawExt raw = _RawExt.__new__(_RawExt)
    raw.data = PyBytes_FromStringAndSize(<const char*>p, n)
    raw.v2 = v2
    raw.binary = binary
    if read:
        fields = _send_values_of(v)
        if fields is not _FAIL:
            raw.fields = fields
    return raw


cdef inline void _release(PyObject** v) noexcept:
    """Drop the references a send-fields array (_SEND_KEYS values) holds."""
    cdef Py_ssize_t i
    for i in range(_SEND_KEYS):
        Py_XDECREF(v[i])


cdef inline object _ext_field(object cmd):
    """:func:`_field` of the ext fields: an undecoded object made the dict."""
    ext = _field(cmd, _OFF_EXT, "ext_fields")
    if type(ext) is _RawExt:
        return _ext_of(cmd)
    return ext


@cython.final
cdef class _ExtFields:
    """``RemotingCommand.ext_fields`` while the accelerator is on: the slot's member
    descriptor, but an undecoded extFields object (_RawExt) is made the dict on the first
    read. Stores and deletes as the member descriptor's."""
    cdef object member

    def __init__(self, member):
        self.member = member

    def __get__(self, obj, objtype):
        cdef PyObject* p
        if obj is None:
            return self
        if not isinstance(obj, _RC):
            return self.member.__get__(obj, objtype)  # (its TypeError)
        p = _slot(obj, _OFF_EXT)
        if p == NULL:
            return self.member.__get__(obj, objtype)  # (its AttributeError)
        if type(<object>p) is _RawExt:
            return _ext_of(obj)
        return <object>p

    def __set__(self, obj, value):
        self.member.__set__(obj, value)

    def __delete__(self, obj):
        self.member.__delete__(obj)


def ext_fields_descriptor(member):
    """Twin of :func:`trocket.codecs.command.ext_fields_descriptor`: RemotingCommand's
    ext_fields descriptor that makes an undecoded extFields object a dict on first read
    (see above), when ``member`` is the slot's own and the slots are known."""
    global _LAZY_EXT
    if not _SLOT_STORES or member is not _RC.__dict__.get("ext_fields") or trocket_slot_offset(member) != _OFF_EXT:
        return member
    _LAZY_EXT = True
    return _ExtFields(member)


def build_command(cls, code, language, version, opaque, flag, remark, ext_fields, body, header, serialize_type):
    """Twin of :func:`trocket.codecs.command.build_command` (the builders' one way)."""
    if cls is not _RC:
        return cls(code, language, version, opaque, flag, remark, ext_fields, body, header, serialize_type)
    return _make_command(code, language, version, opaque, flag, remark, ext_fields, body, header, serialize_type)


def response_command(cls, code, remark=None, header=None, *, body=_EMPTY, ext_fields=None, opaque=0, version=0,
                     language=_JAVA, serialize_type=_JSON):
    """Twin of :func:`trocket.codecs.command.response_command` (``RemotingCommand.response``):
    the keywords taken in C, the command built as :func:`build_command` builds it."""
    if cls is not _RC:
        return cls(code, language, version, opaque, 1, remark, ext_fields, body, header, serialize_type)
    return _make_command(code, language, version, opaque, 1, remark, ext_fields, body, header, serialize_type)


cdef inline int _i32(const unsigned char* p) noexcept:
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) | (<unsigned int>p[2] << 8) | p[3])


cdef inline object _utf8(const unsigned char* p, Py_ssize_t n):
    """The text of ``p[:n]``, or ``_FAIL`` when it is not UTF-8."""
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError:
        return _FAIL


# Short ASCII strings (ext keys, topics, groups, "0", "false") recur in request after
# request: a small direct-mapped cache hands back the same str object (its hash already
# computed, so the dict insert and the header decoder's lookups skip hashing) instead
# of a new one. Bounded: _CACHE_SLOTS entries of at most _CACHE_MAX bytes.
cdef enum:
    _CACHE_SLOTS = 1024
    _CACHE_MAX = 32

cdef extern from *:
    """
    /* the string cache's slot hash: FNV-1a, 32 bits */
    #define TROCKET_FNV_BASIS 2166136261u
    #define TROCKET_FNV_PRIME 16777619u
    """
    const unsigned int _FNV_BASIS "TROCKET_FNV_BASIS"
    const unsigned int _FNV_PRIME "TROCKET_FNV_PRIME"

cdef PyObject* _cache[_CACHE_SLOTS]


cdef extern from "Python.h":
    void PyUnicode_InternInPlace(PyObject** p)
    unsigned int PyUnicode_CHECK_INTERNED(object o)


cdef inline object _text(const unsigned char* p, Py_ssize_t n):
    """``_utf8`` through the cache of short ASCII strings."""
    return _cached_text(p, n, False)


cdef inline object _key_text(const unsigned char* p, Py_ssize_t n):
    """:func:`_text` for a field name: the interned str when it is cached. Header
    decoders look fields up by their interned names (the module's constants); a key
    that is the same object is found without comparing the strings (a one-letter key
    is otherwise CPython's latin-1 singleton, equal to the constant but another object)."""
    return _cached_text(p, n, True)


cdef inline bint _same_bytes(const unsigned char* a, const unsigned char* b, Py_ssize_t n) noexcept:
    """``a[:n] == b[:n]``; a short one compared in place (most cached strings are a few bytes)."""
    cdef Py_ssize_t i
    if n > 8:
        return memcmp(a, b, n) == 0
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


cdef inline object _cached_text(const unsigned char* p, Py_ssize_t n, bint intern):
    cdef unsigned int h = _FNV_BASIS
    cdef Py_ssize_t i
    if n > _CACHE_MAX:
        return _utf8(p, n)
    for i in range(n):
        if p[i] >= 0x80:
            return _utf8(p, n)
        h = (h ^ p[i]) * _FNV_PRIME
    return _cache_slot(p, n, h, intern)


cdef inline object _cache_slot(const unsigned char* p, Py_ssize_t n, unsigned int h, bint intern):
    """The cached str of ``p[:n]``, ASCII and at most ``_CACHE_MAX`` bytes, whose FNV-1a
    hash ``h`` the caller computed (:func:`_cached_text`, or a scanner on its way over it)."""
    cdef PyObject* hit
    cdef PyObject* made
    h = (h ^ (h >> 15)) & (_CACHE_SLOTS - 1)
    hit = _cache[h]
    if hit != NULL and PyUnicode_GET_LENGTH(<object>hit) == n and _same_bytes(
            PyUnicode_1BYTE_DATA(<object>hit), p, n):
        if not intern or PyUnicode_CHECK_INTERNED(<object>hit):
            return <object>hit
        Py_INCREF(<object>hit)
        made = hit
        PyUnicode_InternInPlace(&made)  # (a new reference, to the interned equal str)
        _cache[h] = made
        Py_DECREF(<object>hit)  # the cache's reference to the one it replaces
        return <object>made
    s = PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    Py_INCREF(s)
    made = <PyObject*>s
    if intern:
        PyUnicode_InternInPlace(&made)
    Py_XDECREF(hit)
    _cache[h] = made
    return <object>made


# -- ROCKETMQ binary header -----------------------------------------------------------


cdef object _binary_header(const unsigned char* p, Py_ssize_t end):
    """The command of a ROCKETMQ header, or ``_FAIL`` for anything not plainly valid."""
    cdef int code, version, opaque, flag, remark_len, ext_len
    cdef unsigned int language
    cdef Py_ssize_t pos
    if end < 21:
        return _FAIL
    code = <short>((p[0] << 8) | p[1])
    language = p[2]
    version = <short>((p[3] << 8) | p[4])
    opaque = _i32(p + 5)
    flag = _i32(p + 9)
    remark_len = _i32(p + 13)
    if language >= <unsigned int>len(_LANGS):
        return _FAIL
    pos = 17
    if remark_len < 0 or remark_len > end - pos - 4:
        return _FAIL
    remark = None
    if remark_len:
        remark = _utf8(p + pos, remark_len)
        if remark is _FAIL:
            return _FAIL
        pos += remark_len
    ext_len = _i32(p + pos)
    pos += 4
    if ext_len < 0 or ext_len != end - pos:
        return _FAIL
    ext = None
    if ext_len:
        if _LAZY_EXT and (code == 310 or code == 10 or code == 320) and _BN is not None:
            ext = _binary_send_ext(p, pos, end, code != 10)  # (see _json_send_ext)
        else:
            ext = _binary_ext(p, pos, end)
        if ext is _FAIL:
            return _FAIL
    return _decoded_command(code, _LANGS[language], version, opaque, flag, remark, ext, _ROCKETMQ)


cdef inline Py_ssize_t _binary_item(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end) noexcept:
    """The end of the ext map's item (u16 key length, key, i32 value length, value) at
    ``pos``, or -1 when it does not fit before ``end``."""
    cdef unsigned int klen
    cdef int vlen
    cdef Py_ssize_t kend
    if end - pos < 2:
        return -1
    klen = (p[pos] << 8) | p[pos + 1]
    kend = pos + 2 + klen
    if end - kend < 4:
        return -1
    vlen = _i32(p + kend)
    if vlen < 0 or vlen > end - kend - 4:
        return -1
    return kend + 4 + vlen


cdef object _binary_ext(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end):
    """The ext map ``p[pos:end]`` as a dict, or ``_FAIL``."""
    cdef Py_ssize_t vend, klen
    ext = PyDict_New()
    while pos < end:
        vend = _binary_item(p, pos, end)
        if vend < 0:
            return _FAIL
        klen = (p[pos] << 8) | p[pos + 1]
        key = _key_text(p + pos + 2, klen)
        value = _text(p + pos + 6 + klen, vend - pos - 6 - klen)
        if key is _FAIL or value is _FAIL:
            return _FAIL
        PyDict_SetItem(ext, key, value)
        pos = vend
    return ext


cdef inline bint _utf8_ok(const unsigned char* p, Py_ssize_t n):
    """``p[:n]`` decodes as :func:`_text` decodes it (no str made for ASCII)."""
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] >= 0x80:
            return _utf8(p, n) is not _FAIL
    return True


cdef object _binary_send_ext(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end, bint v2):
    """:func:`_json_send_ext` of a ROCKETMQ ext map ``p[pos:end]``: a _RawExt of its bytes
    and send fields (a key is its UTF-8 bytes: matched as they are), or ``_FAIL`` for a
    map :func:`_binary_ext` would refuse."""
    cdef PyObject* v[_SEND_KEYS]
    cdef Py_ssize_t start = pos, vend, klen, i
    cdef int at
    for i in range(_SEND_KEYS):
        v[i] = NULL
    try:
        while pos < end:
            vend = _binary_item(p, pos, end)
            if vend < 0:
                return _FAIL
            klen = (p[pos] << 8) | p[pos + 1]
            if not _utf8_ok(p + pos + 2, klen):
                return _FAIL
            at = _send_key(p + pos + 2, klen, v2)
            if at < 0:
                if not _utf8_ok(p + pos + 6 + klen, vend - pos - 6 - klen):
                    return _FAIL
            else:
                value = _text(p + pos + 6 + klen, vend - pos - 6 - klen)
                if value is _FAIL:
                    return _FAIL
                Py_XDECREF(v[at])
                Py_INCREF(value)
                v[at] = <PyObject*>value
            pos = vend
        return _raw_send_ext(p + start, end - start, v, v2, True, True)
    finally:
        _release(v)


def decode_binary_header(header):
    """Twin of :func:`trocket.codecs.header_binary.decode_binary_header`."""
    if type(header) is bytes:
        cmd = _binary_header(<const unsigned char*>PyBytes_AS_STRING(header), PyBytes_GET_SIZE(header))
        if cmd is not _FAIL:
            return cmd
    return _py_decode_binary_header(header)


cdef inline bint _int_in(object v, long long lo, long long hi, long long* out):
    """``v`` an int (not a subclass) within ``lo``..``hi``."""
    cdef int overflow = 0
    if type(v) is not int:
        return False
    out[0] = PyLong_AsLongLongAndOverflow(v, &overflow)
    return overflow == 0 and lo <= out[0] <= hi


cdef inline void _put16(unsigned char* p, long long v) noexcept:
    p[0] = <unsigned char>((v >> 8) & 0xFF)
    p[1] = <unsigned char>(v & 0xFF)


def encode_binary_header(cmd, ext):
    """Twin of :func:`trocket.codecs.header_binary.encode_binary_header`: a plain
    command (int code, version, opaque and flag in their ranges, a language of 0-255,
    a str remark or none) and a dict of str keys and str (or None: left out) values,
    each of them encodable as UTF-8; anything else to the pure function."""
    return _encode_binary_header(cmd, ext)


cdef object _encode_binary_header(cmd, ext):
    """:func:`encode_binary_header` (encode_command calls it without a Python call)."""
    cdef long long code, version, opaque, flag, lang
    cdef int overflow = 0
    cdef Py_ssize_t rlen = 0, elen = 0, klen, vlen, pos
    cdef const char* r = NULL
    cdef const char* k
    cdef const char* v
    cdef PyObject* key
    cdef PyObject* value
    cdef bytes out
    cdef unsigned char* w
    if type(cmd) is not _RC or (ext is not None and type(ext) is not dict):
        return _py_encode_binary_header(cmd, ext)
    language = _field(cmd, _OFF_LANG, "language")
    remark = _field(cmd, _OFF_REMARK, "remark")
    if (not _int_in(_field(cmd, _OFF_CODE, "code"), -32768, 32767, &code)
            or not _int_in(_field(cmd, _OFF_VERSION, "version"), -32768, 32767, &version)
            or not _int_in(_field(cmd, _OFF_OPAQUE, "opaque"), -2147483648, 2147483647, &opaque)
            or not _int_in(_field(cmd, _OFF_FLAG, "flag"), -2147483648, 2147483647, &flag)
            or not isinstance(language, int)):
        return _py_encode_binary_header(cmd, ext)
    lang = PyLong_AsLongLongAndOverflow(language, &overflow)
    if overflow != 0 or lang < 0 or lang > 255:
        return _py_encode_binary_header(cmd, ext)
    try:
        if remark is not None and type(remark) is not str:
            return _py_encode_binary_header(cmd, ext)
        if remark:
            r = PyUnicode_AsUTF8AndSize(remark, &rlen)
        if ext:
            pos = 0
            while PyDict_Next(ext, &pos, &key, &value):
                if value == NULL or <object>value is None:
                    continue
                if type(<object>key) is not str or type(<object>value) is not str:
                    return _py_encode_binary_header(cmd, ext)
                PyUnicode_AsUTF8AndSize(<object>key, &klen)
                PyUnicode_AsUTF8AndSize(<object>value, &vlen)
                if klen > 0xFFFF or vlen > 0x7FFFFFFF:
                    return _py_encode_binary_header(cmd, ext)
                elen += 6 + klen + vlen
    except UnicodeError:  # a lone surrogate: the pure function's error
        return _py_encode_binary_header(cmd, ext)
    if rlen > 0x7FFFFFFF or elen > 0x7FFFFFFF:
        return _py_encode_binary_header(cmd, ext)
    out = PyBytes_FromStringAndSize(NULL, 21 + rlen + elen)
    w = <unsigned char*>PyBytes_AS_STRING(out)
    _put16(w, code)
    w[2] = <unsigned char>lang
    _put16(w + 3, version)
    _put32(w + 5, opaque)
    _put32(w + 9, flag)
    _put32(w + 13, rlen)
    if rlen:
        memcpy(w + 17, r, rlen)
    w += 17 + rlen
    _put32(w, elen)
    w += 4
    if elen:
        pos = 0
        while PyDict_Next(ext, &pos, &key, &value):
            if <object>value is None:
                continue
            k = PyUnicode_AsUTF8AndSize(<object>key, &klen)
            v = PyUnicode_AsUTF8AndSize(<object>value, &vlen)
            _put16(w, klen)
            memcpy(w + 2, k, klen)
            w += 2 + klen
            _put32(w, vlen)
            memcpy(w + 4, v, vlen)
            w += 4 + vlen
    return out


# -- JSON header ----------------------------------------------------------------------
#
# A parser for what a RocketMQ JSON header holds: one object of strings, ints,
# true/false/null and the extFields object of the same scalars. Anything else (floats,
# arrays, nested values elsewhere, lone surrogate escapes, bad syntax) is _FAIL.


cdef struct _Cursor:
    const unsigned char* p
    Py_ssize_t pos
    Py_ssize_t end


cdef inline void _ws(_Cursor* c) noexcept:
    cdef unsigned char ch
    if c.pos < c.end and c.p[c.pos] > 32:  # (compact JSON: no whitespace, one test)
        return
    while c.pos < c.end:
        ch = c.p[c.pos]
        if ch == 32 or ch == 9 or ch == 10 or ch == 13:
            c.pos += 1
        else:
            break


cdef inline int _hex4(const unsigned char* p) noexcept:
    """The value of four hex digits, or -1."""
    cdef int v = 0, i, d
    cdef unsigned char ch
    for i in range(4):
        ch = p[i]
        if 48 <= ch <= 57:
            d = ch - 48
        elif 97 <= ch <= 102:
            d = ch - 87
        elif 65 <= ch <= 70:
            d = ch - 55
        else:
            return -1
        v = (v << 4) | d
    return v


cdef enum:
    _UNESCAPE_STACK = 2048  # an escaped string up to this many bytes is unescaped on the stack


cdef object _json_string_escaped(_Cursor* c, Py_ssize_t start):
    """The rest of a string holding escapes, from its opening quote's next byte."""
    cdef unsigned char stack[_UNESCAPE_STACK]
    cdef unsigned char* out
    if c.end - start + 1 <= _UNESCAPE_STACK:
        return _unescape(c, start, stack)
    out = <unsigned char*>PyMem_Malloc(c.end - start + 1)
    if out == NULL:
        raise MemoryError()
    try:
        return _unescape(c, start, out)
    finally:
        PyMem_Free(out)


cdef object _unescape(_Cursor* c, Py_ssize_t start, unsigned char* out):
    """:func:`_json_string_escaped` into ``out``, room for the rest of the input."""
    cdef Py_ssize_t i = start, n = 0
    cdef unsigned char ch
    cdef int u, lo
    while i < c.end:
        ch = c.p[i]
        if ch > 34 and ch != 92:  # (the usual byte: one test)
            out[n] = ch
            n += 1
            i += 1
            continue
        if ch == 34:  # closing quote
            c.pos = i + 1
            return _utf8(out, n)
        if ch < 32:
            return _FAIL
        if ch != 92:
            out[n] = ch
            n += 1
            i += 1
            continue
        if i + 1 >= c.end:
            return _FAIL
        ch = c.p[i + 1]
        i += 2
        if ch == 117:  # \uXXXX (first: Java writes its properties' separators so)
            if c.end - i < 4:
                return _FAIL
            u = _hex4(c.p + i)
            if u < 0:
                return _FAIL
            i += 4
            if 0xD800 <= u <= 0xDBFF:  # a pair, else a lone surrogate: pure path
                if c.end - i < 6 or c.p[i] != 92 or c.p[i + 1] != 117:
                    return _FAIL
                lo = _hex4(c.p + i + 2)
                if not 0xDC00 <= lo <= 0xDFFF:
                    return _FAIL
                i += 6
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00)
            elif 0xDC00 <= u <= 0xDFFF:
                return _FAIL
            if u < 0x80:
                out[n] = u
            elif u < 0x800:
                out[n] = 0xC0 | (u >> 6)
                out[n + 1] = 0x80 | (u & 0x3F)
                n += 1
            elif u < 0x10000:
                out[n] = 0xE0 | (u >> 12)
                out[n + 1] = 0x80 | ((u >> 6) & 0x3F)
                out[n + 2] = 0x80 | (u & 0x3F)
                n += 2
            else:
                out[n] = 0xF0 | (u >> 18)
                out[n + 1] = 0x80 | ((u >> 12) & 0x3F)
                out[n + 2] = 0x80 | ((u >> 6) & 0x3F)
                out[n + 3] = 0x80 | (u & 0x3F)
                n += 3
        elif ch == 34 or ch == 92 or ch == 47:
            out[n] = ch
        elif ch == 98:
            out[n] = 8
        elif ch == 102:
            out[n] = 12
        elif ch == 110:
            out[n] = 10
        elif ch == 114:
            out[n] = 13
        elif ch == 116:
            out[n] = 9
        else:
            return _FAIL
        n += 1
    return _FAIL  # unterminated


cdef inline object _json_string(_Cursor* c, bint key=False):
    """The string at the cursor (on its opening quote), or ``_FAIL``; a ``key`` is
    interned (:func:`_key_text`). One pass over a plain string: while it is short
    enough for the string cache, its slot hash is computed on the way."""
    cdef const unsigned char* p = c.p
    cdef Py_ssize_t start = c.pos + 1, i = start, end = c.end, short_end
    cdef unsigned char ch, high = 0
    cdef unsigned int h = _FNV_BASIS
    short_end = start + _CACHE_MAX + 1 if end - start > _CACHE_MAX + 1 else end
    while i < short_end:  # (its closing quote within the cache's length)
        ch = p[i]
        if ch == 34:
            c.pos = i + 1
            if high & 0x80:
                return _utf8(p + start, i - start)
            return _cache_slot(p + start, i - start, h, key)
        if ch == 92:
            return _json_string_escaped(c, start)
        if ch < 32:
            return _FAIL
        high |= ch
        h = (h ^ ch) * _FNV_PRIME
        i += 1
    while i < end:  # too long for the cache
        ch = p[i]
        if ch == 34:
            c.pos = i + 1
            return _utf8(p + start, i - start)
        if ch == 92:
            return _json_string_escaped(c, start)
        if ch < 32:
            return _FAIL
        i += 1
    return _FAIL


cdef inline bint _literal(_Cursor* c, const char* word, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    if c.end - c.pos < n:
        return False
    for i in range(n):
        if c.p[c.pos + i] != <unsigned char>word[i]:
            return False
    c.pos += n
    return True


cdef inline bint _int_span(_Cursor* c, Py_ssize_t* start, long long* value) noexcept:
    """Move over a JSON integer (not a float, at most 18 digits), its value read on the
    way; False if it is not one."""
    cdef Py_ssize_t i = c.pos, digits
    cdef unsigned char ch
    cdef unsigned long long v = 0  # (unsigned: past 18 digits it wraps, and is not used)
    cdef bint neg = False
    start[0] = i
    if i < c.end and c.p[i] == 45:  # '-'
        neg = True
        i += 1
    if i >= c.end or not 48 <= c.p[i] <= 57:
        return False
    if c.p[i] == 48:
        i += 1
    else:
        while i < c.end and 48 <= c.p[i] <= 57:
            v = v * 10 + (c.p[i] - 48)
            i += 1
    digits = i - start[0] - neg
    if digits > 18:
        return False
    if i < c.end:
        ch = c.p[i]
        if ch == 46 or ch == 101 or ch == 69 or 48 <= ch <= 57:  # '.', 'e', 'E', or "0" then digits
            return False
    c.pos = i
    value[0] = -<long long>v if neg else <long long>v
    return True


cdef object _json_ext_value(_Cursor* c):
    """An extFields value as the text Java reads: strings as they are, ints by their
    text, true/false by name, null as None (dropped later)."""
    cdef Py_ssize_t start = 0
    cdef long long value = 0
    cdef unsigned char ch
    if c.pos >= c.end:
        return _FAIL
    ch = c.p[c.pos]
    if ch == 34:
        return _json_string(c)
    if ch == 45 or 48 <= ch <= 57:
        if not _int_span(c, &start, &value):
            return _FAIL
        if c.pos - start == 2 and c.p[start] == 45 and c.p[start + 1] == 48:
            return "0"  # -0 is the int 0
        return _text(c.p + start, c.pos - start)
    if ch == 116 and _literal(c, "true", 4):
        return "true"
    if ch == 102 and _literal(c, "false", 5):
        return "false"
    if ch == 110 and _literal(c, "null", 4):
        return None
    return _FAIL


cdef inline bint _json_colon(_Cursor* c) noexcept:
    """Past a member's ``:`` and the whitespace around it; False if there is none."""
    _ws(c)
    if c.pos >= c.end or c.p[c.pos] != 58:  # ':'
        return False
    c.pos += 1
    _ws(c)
    return True


cdef inline int _json_next(_Cursor* c) noexcept:
    """After a member's value: past a ``,`` (1: another member follows) or the object's
    closing ``}`` (0); -1 for anything else."""
    _ws(c)
    if c.pos >= c.end:
        return -1
    if c.p[c.pos] == 44:  # ','
        c.pos += 1
        _ws(c)
        return 1
    if c.p[c.pos] == 125:  # '}'
        c.pos += 1
        return 0
    return -1


cdef object _json_ext(_Cursor* c):
    """The extFields object at the cursor (on its ``{``), or ``_FAIL``."""
    cdef bint has_null = False
    cdef int more
    cdef dict ext = _PyDict_NewPresized(16)  # a send's 11-15 fields: no resize on the way
    c.pos += 1
    _ws(c)
    if c.pos < c.end and c.p[c.pos] == 125:  # '}'
        c.pos += 1
        return ext
    while True:
        if c.pos >= c.end or c.p[c.pos] != 34:
            return _FAIL
        key = _json_string(c, True)
        if key is _FAIL or not _json_colon(c):
            return _FAIL
        value = _json_ext_value(c)
        if value is _FAIL:
            return _FAIL
        if value is None:
            has_null = True
        PyDict_SetItem(ext, key, value)
        more = _json_next(c)
        if more < 0:
            return _FAIL
        if not more:
            break
    if has_null:  # the pure path keeps the first-seen order and drops the nulls
        return {k: v for k, v in ext.items() if v is not None}
    return ext


cdef bint _json_int32(_Cursor* c, int* out) noexcept:
    """A header int field: a JSON int in int32 range, or null (0)."""
    cdef Py_ssize_t start = 0
    cdef long long v
    if c.pos < c.end and c.p[c.pos] == 110:
        if _literal(c, "null", 4):
            out[0] = 0
            return True
        return False
    if not _int_span(c, &start, &v):
        return False
    if v < -2147483648 or v > 2147483647:
        return False
    out[0] = <int>v
    return True


cdef inline bint _json_skip_string(_Cursor* c):
    """Move over a string no one reads: no str made for a plain ASCII one; one with an
    escape or a non-ASCII byte is decoded (:func:`_json_string` decides)."""
    cdef Py_ssize_t i = c.pos + 1
    cdef unsigned char ch
    while i < c.end:
        ch = c.p[i]
        if ch == 34:
            c.pos = i + 1
            return True
        if ch == 92 or ch >= 0x80:
            return _json_string(c) is not _FAIL
        if ch < 32:
            return False
        i += 1
    return False


cdef bint _json_skip_scalar(_Cursor* c):
    """Move over a string, int, true, false or null."""
    cdef Py_ssize_t start = 0
    cdef long long value = 0
    if c.pos >= c.end:
        return False
    ch = c.p[c.pos]
    if ch == 34:
        return _json_skip_string(c)
    if ch == 45 or 48 <= ch <= 57:
        return _int_span(c, &start, &value)
    return _literal(c, "true", 4) or _literal(c, "false", 5) or _literal(c, "null", 4)


cdef enum:
    _K_OTHER = 0
    _K_CODE
    _K_EXT
    _K_FLAG
    _K_LANGUAGE
    _K_OPAQUE
    _K_REMARK
    _K_VERSION


cdef inline bint _is(const unsigned char* p, Py_ssize_t n, const char* word, Py_ssize_t wn) noexcept:
    return n == wn and memcmp(p, word, n) == 0


cdef int _json_key(_Cursor* c) noexcept:
    """The header field named by the key at the cursor (on its opening quote), matched
    on its bytes (no str made: the header's keys are always the same few); -1 for a key
    with an escape, a control character or a non-ASCII byte (the pure decoder then
    decides) or none at all."""
    cdef Py_ssize_t start = c.pos + 1, i = start, n
    cdef unsigned char ch
    cdef const unsigned char* k
    while i < c.end:
        ch = c.p[i]
        if ch == 34:
            break
        if ch == 92 or ch < 32 or ch >= 0x80:
            return -1
        i += 1
    else:
        return -1
    c.pos = i + 1
    k = c.p + start
    n = i - start
    if _is(k, n, "code", 4):
        return _K_CODE
    if _is(k, n, "extFields", 9):
        return _K_EXT
    if _is(k, n, "flag", 4):
        return _K_FLAG
    if _is(k, n, "language", 8):
        return _K_LANGUAGE
    if _is(k, n, "opaque", 6):
        return _K_OPAQUE
    if _is(k, n, "remark", 6):
        return _K_REMARK
    if _is(k, n, "version", 7):
        return _K_VERSION
    return _K_OTHER


cdef object _json_header(const unsigned char* p, Py_ssize_t end):
    """The command of a JSON header, or ``_FAIL`` for anything not plainly valid."""
    cdef _Cursor c
    cdef int code = 0, flag = 0, opaque = 0, version = 0, key = 0
    cdef unsigned char ch
    c.p = p
    c.pos = 0
    c.end = end
    lang = _JAVA
    remark = None
    ext = None
    _ws(&c)
    if c.pos >= c.end or c.p[c.pos] != 123:  # '{'
        return _FAIL
    c.pos += 1
    _ws(&c)
    if c.pos < c.end and c.p[c.pos] == 125:
        c.pos += 1
    else:
        while True:
            if c.pos >= c.end or c.p[c.pos] != 34:
                return _FAIL
            key = _json_key(&c)
            if key < 0:
                return _FAIL
            _ws(&c)
            if c.pos >= c.end or c.p[c.pos] != 58:
                return _FAIL
            c.pos += 1
            _ws(&c)
            if c.pos >= c.end:
                return _FAIL
            ch = c.p[c.pos]
            if key == _K_CODE:
                if not _json_int32(&c, &code):
                    return _FAIL
            elif key == _K_EXT:
                if ch == 123 and _LAZY_EXT and (code == 310 or code == 10 or code == 320) and _BN is not None:
                    # a send's (code comes first, in fastjson's key order): its send fields
                    # read for command_send_fields, the dict made only if something reads it
                    ext = _json_send_ext(&c, code != 10)
                    if ext is _FAIL:
                        return _FAIL
                elif ch == 123:
                    ext = _json_ext(&c)
                    if ext is _FAIL:
                        return _FAIL
                elif _literal(&c, "null", 4):
                    ext = None
                else:
                    return _FAIL
            elif key == _K_FLAG:
                if not _json_int32(&c, &flag):
                    return _FAIL
            elif key == _K_LANGUAGE:
                if c.end - c.pos >= 6 and memcmp(c.p + c.pos, b'"JAVA"', 6) == 0:  # (Java's clients)
                    lang = _JAVA
                    c.pos += 6
                elif ch == 34:
                    name = _json_string(&c)
                    if name is _FAIL:
                        return _FAIL
                    lang = _LANG_BY_NAME.get(name)
                    if lang is None:
                        return _FAIL
                elif _literal(&c, "null", 4):
                    lang = _JAVA
                else:
                    return _FAIL
            elif key == _K_OPAQUE:
                if not _json_int32(&c, &opaque):
                    return _FAIL
            elif key == _K_REMARK:
                if ch == 34:
                    remark = _json_string(&c)
                    if remark is _FAIL:
                        return _FAIL
                elif _literal(&c, "null", 4):
                    remark = None
                else:
                    return _FAIL
            elif key == _K_VERSION:
                if not _json_int32(&c, &version):
                    return _FAIL
            elif not _json_skip_scalar(&c):  # serializeTypeCurrentRPC and the unknown
                return _FAIL
            _ws(&c)
            if c.pos >= c.end:
                return _FAIL
            if c.p[c.pos] == 44:
                c.pos += 1
                _ws(&c)
                continue
            if c.p[c.pos] == 125:
                c.pos += 1
                break
            return _FAIL
    _ws(&c)
    if c.pos != c.end:
        return _FAIL
    return _decoded_command(code, lang, version, opaque, flag, remark, ext, _JSON)


def decode_json_header(header):
    """Twin of :func:`trocket.codecs.header_json.decode_json_header`."""
    if type(header) is bytes:
        cmd = _json_header(<const unsigned char*>PyBytes_AS_STRING(header), PyBytes_GET_SIZE(header))
        if cmd is not _FAIL:
            return cmd
    return _py_decode_json_header(header)


cdef dict _LANG_NAME_BYTES = {lang: lang.name.encode() for lang in LanguageCode}


cdef inline Py_ssize_t _plain_ascii(object s):
    """The length of ``s`` when it is a str of printable ASCII with no ``"`` or
    backslash (written as-is by fastjson and by Python's encoder alike), else -1."""
    cdef Py_ssize_t n, i
    cdef const unsigned char* p
    cdef unsigned char ch
    if not isinstance(s, str) or not PyUnicode_IS_ASCII(s):
        return -1
    n = PyUnicode_GET_LENGTH(s)
    p = PyUnicode_1BYTE_DATA(s)
    for i in range(n):
        ch = p[i]
        if ch < 0x20 or ch == 0x22 or ch == 0x5C or ch == 0x7F:
            return -1
    return n


cdef inline bint _json_int(object v, char* buf, Py_ssize_t* n):
    """An int (not a bool) that fits a long long, in decimal into ``buf`` (24 bytes)."""
    cdef int overflow = 0
    cdef long long x
    cdef unsigned char tmp[24]
    cdef Py_ssize_t k, j = 0
    if not isinstance(v, int) or isinstance(v, bool):
        return False
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow != 0:
        return False
    if x < 0:
        buf[0] = 45  # -
        j = 1
        k = _decimal(<unsigned long long>(-(x + 1)) + 1, tmp + 24)
    else:
        k = _decimal(<unsigned long long>x, tmp + 24)
    memcpy(buf + j, tmp + 24 - k, k)
    n[0] = j + k
    return True


cdef inline Py_ssize_t _put(unsigned char* w, Py_ssize_t pos, const char* src, Py_ssize_t n) noexcept:
    memcpy(w + pos, src, n)
    return pos + n


def encode_json_header(cmd, ext):
    """Twin of :func:`trocket.codecs.header_json.encode_json_header`: a command of int
    fields, a known language, and ext fields (a dict of str to str or None: left out)
    and a remark of printable ASCII without quotes or backslashes, written as fastjson
    writes it in one pass; anything else to the pure function."""
    return _encode_json_header(cmd, ext)


cdef object _encode_json_header(cmd, ext):
    """:func:`encode_json_header` (encode_command calls it without a Python call)."""
    cdef char code_b[24]
    cdef char flag_b[24]
    cdef char opaque_b[24]
    cdef char version_b[24]
    cdef Py_ssize_t code_n, flag_n, opaque_n, version_n, total, pos, klen, vlen, rlen = -1, dpos
    cdef PyObject* key
    cdef PyObject* value
    cdef bint first
    cdef bytes out
    cdef unsigned char* w
    if type(cmd) is not _RC or (ext is not None and type(ext) is not dict):
        return _py_encode_json_header(cmd, ext)
    lang = _LANG_NAME_BYTES.get(_field(cmd, _OFF_LANG, "language"))
    if (lang is None or not _json_int(_field(cmd, _OFF_CODE, "code"), code_b, &code_n)
            or not _json_int(_field(cmd, _OFF_FLAG, "flag"), flag_b, &flag_n)
            or not _json_int(_field(cmd, _OFF_OPAQUE, "opaque"), opaque_b, &opaque_n)
            or not _json_int(_field(cmd, _OFF_VERSION, "version"), version_b, &version_n)):
        return _py_encode_json_header(cmd, ext)
    remark = _field(cmd, _OFF_REMARK, "remark")
    # {"code":C,"flag":F,"language":"L","opaque":O,"serializeTypeCurrentRPC":"JSON","version":V}
    total = 85 + code_n + flag_n + PyBytes_GET_SIZE(lang) + opaque_n + version_n
    if remark is not None:
        rlen = _plain_ascii(remark)
        if rlen < 0:
            return _py_encode_json_header(cmd, ext)
        total += 12 + rlen  # ,"remark":""
    if ext is not None:
        total += 15  # ,"extFields":{}
        first = True
        dpos = 0
        while PyDict_Next(ext, &dpos, &key, &value):
            if <object>value is None:
                continue
            klen = _plain_ascii(<object>key)
            vlen = _plain_ascii(<object>value)
            if klen < 0 or vlen < 0:
                return _py_encode_json_header(cmd, ext)
            total += klen + vlen + (5 if first else 6)  # ,"k":"v"
            first = False
    out = PyBytes_FromStringAndSize(NULL, total)
    w = <unsigned char*>PyBytes_AS_STRING(out)
    pos = _put(w, 0, '{"code":', 8)
    pos = _put(w, pos, code_b, code_n)
    if ext is not None:
        pos = _put(w, pos, ',"extFields":{', 14)
        first = True
        dpos = 0
        while PyDict_Next(ext, &dpos, &key, &value):
            if <object>value is None:
                continue
            if not first:
                w[pos] = 44  # ,
                pos += 1
            first = False
            w[pos] = 34
            pos = _put(w, pos + 1, <const char*>PyUnicode_1BYTE_DATA(<object>key), PyUnicode_GET_LENGTH(<object>key))
            pos = _put(w, pos, '":"', 3)
            pos = _put(w, pos, <const char*>PyUnicode_1BYTE_DATA(<object>value), PyUnicode_GET_LENGTH(<object>value))
            w[pos] = 34
            pos += 1
        w[pos] = 125  # }
        pos += 1
    pos = _put(w, pos, ',"flag":', 8)
    pos = _put(w, pos, flag_b, flag_n)
    pos = _put(w, pos, ',"language":"', 13)
    pos = _put(w, pos, PyBytes_AS_STRING(lang), PyBytes_GET_SIZE(lang))
    pos = _put(w, pos, '","opaque":', 11)
    pos = _put(w, pos, opaque_b, opaque_n)
    if rlen >= 0:
        pos = _put(w, pos, ',"remark":"', 11)
        pos = _put(w, pos, <const char*>PyUnicode_1BYTE_DATA(remark), rlen)
        w[pos] = 34
        pos += 1
    pos = _put(w, pos, ',"serializeTypeCurrentRPC":"JSON","version":', 44)
    pos = _put(w, pos, version_b, version_n)
    w[pos] = 125
    pos += 1
    assert pos == total
    return out


# -- frames ---------------------------------------------------------------------------


cdef class FrameDecoder:
    """Twin of :class:`trocket.codecs.frame.FrameDecoder` (same behaviour, same errors:
    tests/codecs/test_accel.py feeds both the same chunks)."""

    cdef bytearray _buf
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _max  # for comparisons
    cdef object _limit  # as given: the property and the error show it
    cdef bint _sniff
    cdef object _error

    def __init__(self, max_frame_length=16 * 1024 * 1024, *, sniff=True):
        if max_frame_length < 4:
            raise ValueError("max_frame_length must be at least 4")
        self._buf = bytearray()
        self._pos = 0
        self._limit = max_frame_length
        self._max = min(int(max_frame_length), 0x7FFFFFFF)
        self._sniff = bool(sniff)
        self._error = None

    @property
    def max_frame_length(self):
        return self._limit

    @property
    def buffered(self):
        """Bytes received but not yet returned as frames."""
        return PyByteArray_GET_SIZE(self._buf) - self._pos

    def feed(self, data):
        if self._error is not None:
            raise self._error
        if self._pos:
            if self._pos >= PyByteArray_GET_SIZE(self._buf) - self._pos:
                del self._buf[: self._pos]
                self._pos = 0
        self._buf += data

    def next_frame(self):
        """Return the next whole payload (without its length prefix), or ``None``."""
        cdef Py_ssize_t pos = self._pos, size, end
        cdef const unsigned char* p
        cdef int length
        if self._error is not None:
            raise self._error
        size = PyByteArray_GET_SIZE(self._buf)
        if size - pos < 4:
            if self._sniff and size - pos:
                self._check_foreign(bytes(self._buf[pos:]))
            return None
        if self._sniff:
            self._check_foreign(bytes(self._buf[pos : pos + 4]))
            self._sniff = False
        p = <const unsigned char*>PyByteArray_AS_STRING(self._buf) + pos
        length = _i32(p)
        if length < 4 or length > self._max:
            self._fail(length)
        end = pos + 4 + length
        if end > size:
            return None
        frame = PyBytes_FromStringAndSize(<const char*>p + 4, length)
        self._pos = end
        return frame

    def __iter__(self):
        """Yield every whole payload buffered so far."""
        while True:
            frame = self.next_frame()
            if frame is None:
                return
            yield frame

    def close(self):
        """Declare end of stream; raises if it cut a frame short."""
        if self._error is None and self.buffered:
            self._error = TruncatedFrameError(
                f"stream ended with {self.buffered} bytes of an incomplete frame"
            )
            raise self._error

    cdef _check_foreign(self, bytes prefix):
        protocol = _sniff_foreign_protocol(prefix)
        if protocol is not None:
            self._error = NotRocketMQError(protocol, prefix)
            raise self._error

    cdef _fail(self, int length):
        if length > self._max:
            self._error = FrameTooLargeError(length, self._limit)
        else:
            self._error = FrameError(
                f"impossible frame length {length} (a frame holds at least 4 bytes)"
            )
        raise self._error


# -- whole command --------------------------------------------------------------------


def decode_command(payload):
    """Twin of :func:`trocket.codecs.serialize.decode_command`."""
    cdef const unsigned char* p
    cdef Py_ssize_t n, hlen
    cdef unsigned int stype
    if type(payload) is not bytes:
        return _py_decode_command(payload)
    p = <const unsigned char*>PyBytes_AS_STRING(payload)
    n = PyBytes_GET_SIZE(payload)
    if n < 4:
        return _py_decode_command(payload)
    stype = p[0]
    hlen = (p[1] << 16) | (p[2] << 8) | p[3]
    if hlen > n - 4:
        return _py_decode_command(payload)
    if stype == 0:
        cmd = _json_header(p + 4, hlen)
        if cmd is _FAIL:
            cmd = _py_decode_json_header(payload[4 : 4 + hlen])
    elif stype == 1:
        cmd = _binary_header(p + 4, hlen)
        if cmd is _FAIL:
            cmd = _py_decode_binary_header(payload[4 : 4 + hlen])
    else:
        return _py_decode_command(payload)
    cmd.body = PyBytes_FromStringAndSize(<const char*>p + 4 + hlen, n - 4 - hlen)
    return cmd


def encode_command(cmd):
    """Twin of :func:`trocket.codecs.serialize.encode_command`: a plain command (its class
    exactly RemotingCommand, a bytes body or none, a JSON or ROCKETMQ serialize type),
    its header by the header twins above, the frame made in one allocation (no prefix
    struct, no join); anything else, every error included, to the pure function."""
    cdef Py_ssize_t hlen, blen
    cdef long long total
    cdef unsigned int stype
    cdef bytes out
    cdef unsigned char* w
    if type(cmd) is not _RC:
        return _py_encode_command(cmd)
    body = _field(cmd, _OFF_BODY, "body")
    if body is None:
        body = _EMPTY
    elif type(body) is not bytes:
        return _py_encode_command(cmd)
    st = _field(cmd, _OFF_STYPE, "serialize_type")
    custom = _field(cmd, _OFF_HEADER, "custom_header")
    if custom is None:
        ext = _ext_field(cmd)
    else:
        # wire_ext_fields' commonest case (a typed service's header, no other ext fields,
        # not a FastCodes header in a ROCKETMQ frame) without its two Python calls: the
        # class's encode_wire straight from custom_header's table, once it is there
        enc = None
        if _header_wire is not None and not _ext_field(cmd) and (st is _JSON or st is _ROCKETMQ) and (
                st is _JSON or type(custom) not in _fast_codes):
            enc = _header_wire.get(type(custom))
        if enc is None:
            ext = _wire_ext_fields(cmd)
        elif type(enc) is _TypedHeaderCodec:
            ext = (<_TypedHeaderCodec>enc).wire_of(custom)
        else:
            ext = enc(custom)
    if st is _ROCKETMQ:
        header = _encode_binary_header(cmd, ext)
        stype = 1
    elif st is _JSON:
        header = _encode_json_header(cmd, ext)
        stype = 0
    else:
        return _py_encode_command(cmd)
    hlen = PyBytes_GET_SIZE(header)
    blen = PyBytes_GET_SIZE(body)
    total = 4 + <long long>hlen + blen
    if hlen > 0xFFFFFF or total > 0x7FFFFFFF:
        return _py_encode_command(cmd)  # its error
    out = PyBytes_FromStringAndSize(NULL, total + 4)
    w = <unsigned char*>PyBytes_AS_STRING(out)
    _put32(w, total)
    _put32(w + 4, (stype << 24) | hlen)
    memcpy(w + 8, PyBytes_AS_STRING(header), hlen)
    if blen:
        memcpy(w + 8 + hlen, PyBytes_AS_STRING(body), blen)
    return out


# -- the send request headers (FastCodes) --------------------------------------------
#
# SendMessageRequestHeader (V1, what the C++ client sends) and V2 (Java, JS) hold the same
# fields under other names: one reader for both, given the wire keys and attribute names
# in the order a b c d e f g h i j k l m n bname.

_V1_KEYS = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
            "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode",
            "maxReconsumeTimes", "batch", None, "bname")
_V2_KEYS = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "bname")

cdef object _V1 = None
cdef object _V2 = None
cdef object _BN = None
cdef object _PQ = None


cdef inline bint _digits(object v, int max_digits, long long* out):
    """``v`` (a str) as plain ASCII digits (at most ``max_digits``) or exactly ``-1``."""
    cdef Py_ssize_t n, i
    cdef const unsigned char* s
    cdef long long x = 0
    if type(v) is not str or not PyUnicode_IS_ASCII(v):
        return False
    n = PyUnicode_GET_LENGTH(v)
    s = PyUnicode_1BYTE_DATA(v)
    if n == 2 and s[0] == 45 and s[1] == 49:
        out[0] = -1
        return True
    if n == 0 or n > max_digits:
        return False
    for i in range(n):
        if not 48 <= s[i] <= 57:
            return False
        x = x * 10 + (s[i] - 48)
    out[0] = x
    return True


# The header decoders' field reads: PyDict_GetItemWithError (a str key cannot fail to
# hash), not PyDict_GetItem, which saves and restores the error state on every call.
cdef inline object _get(dict ext, object key):
    cdef PyObject* v = PyDict_GetItemWithError(ext, key)
    return None if v == NULL else <object>v


# The send fields' checks, on a field's value (NULL: absent), from a dict or a header's text.
cdef inline object _req_str(PyObject* v):
    if v == NULL or type(<object>v) is not str:
        return _FAIL
    return <object>v


cdef inline object _req_int(PyObject* v, int max_digits):
    cdef long long x = 0
    if v == NULL or not _digits(<object>v, max_digits, &x):
        return _FAIL
    return x


cdef inline object _opt_i32(PyObject* v):
    """An optional int32 field: None when absent or null, its int when plain digits, else _FAIL."""
    cdef long long x = 0
    if v == NULL or <object>v is None:
        return None
    if _digits(<object>v, 9, &x):
        return x
    return _FAIL


cdef inline object _bool(PyObject* v):
    """A Java primitive boolean: False when absent or null, else one of the accepted spellings."""
    if v == NULL or <object>v is None:
        return False
    if type(<object>v) is not str:
        return _FAIL
    v = PyDict_GetItemWithError(<dict>_BN, <object>v)  # (a dict: no method call per field)
    return _FAIL if v == NULL else <object>v


cdef enum:
    _SEND_KEYS = 13  # the fields a..m (V2's names) the send fields are read from


cdef object _send_values_of(PyObject** v):
    """A send header's checked values in :class:`SendFields` order (topic, defaultTopic,
    defaultTopicQueueNums, queueId, sysFlag, bornTimestamp, flag, properties,
    reconsumeTimes, maxReconsumeTimes, batch; the producer group and unitMode checked
    too), from its fields a..m (``v``, NULL when absent), or ``_FAIL`` for anything the
    pure fast decoder would not take itself (it then decides, handing over to the
    generic path where it must)."""
    a = _req_str(v[0])
    b = _req_str(v[1])
    c = _req_str(v[2])
    d = _req_int(v[3], 9)
    e = _req_int(v[4], 9)
    f = _req_int(v[5], 9)
    g = _req_int(v[6], 18)
    h = _req_int(v[7], 9)
    j = _opt_i32(v[9])
    l = _opt_i32(v[11])
    k = _bool(v[10])
    m = _bool(v[12])
    if (a is _FAIL or b is _FAIL or c is _FAIL or d is _FAIL or e is _FAIL or f is _FAIL
            or g is _FAIL or h is _FAIL or j is _FAIL or l is _FAIL or k is _FAIL or m is _FAIL):
        return _FAIL
    return (b, c, d, e, f, g, h, None if v[8] == NULL else <object>v[8], j, l, m)


cdef object _send_values(dict ext, tuple keys):
    """:func:`_send_values_of` the fields of ``ext`` named by ``keys``."""
    cdef PyObject* v[_SEND_KEYS]
    cdef Py_ssize_t i
    for i in range(_SEND_KEYS):
        v[i] = PyDict_GetItemWithError(ext, keys[i])
    return _send_values_of(v)


cdef int _send_key(const unsigned char* k, Py_ssize_t n, bint v2):
    """The index (0-12) of the key ``k[:n]`` (ASCII) among the send fields a..m of a V2
    (``v2``) or V1 header, or -1."""
    cdef Py_ssize_t i
    cdef str name
    if v2:
        if n == 1 and 97 <= k[0] <= 109:  # 'a'..'m'
            return k[0] - 97
        return -1
    for i in range(_SEND_KEYS):
        name = _V1_KEYS[i]
        if PyUnicode_GET_LENGTH(name) == n and memcmp(PyUnicode_1BYTE_DATA(name), k, n) == 0:
            return <int>i
    return -1


cdef object _json_send_ext(_Cursor* c, bint v2):
    """A send request's extFields object at the cursor (on its ``{``) left undecoded: a
    _RawExt holding its text and its send fields (:func:`_send_values_of` of V2's or
    V1's keys, read in the same pass as the dict would hold them: the last of a
    repeated key, a null absent; None when they do not check, or a key has an escape or
    a non-ASCII byte: then the dict's way decides), or ``_FAIL`` for an object
    :func:`_json_ext` would refuse (checked as it checks: :func:`_json_skip_string` and
    :func:`_json_skip_scalar` accept what :func:`_json_string` and :func:`_json_ext_value` do)."""
    cdef PyObject* v[_SEND_KEYS]
    cdef Py_ssize_t start = c.pos, i
    cdef bint odd = False
    cdef int at, more
    cdef unsigned char ch
    for i in range(_SEND_KEYS):
        v[i] = NULL
    try:
        c.pos += 1
        _ws(c)
        if c.pos < c.end and c.p[c.pos] == 125:  # '}'
            c.pos += 1
        else:
            while True:
                if c.pos >= c.end or c.p[c.pos] != 34:
                    return _FAIL
                i = c.pos + 1
                while i < c.end:
                    ch = c.p[i]
                    if ch == 34 or ch == 92 or ch < 32 or ch >= 0x80:
                        break
                    i += 1
                if i < c.end and c.p[i] == 34:  # a plain key
                    at = _send_key(c.p + c.pos + 1, i - c.pos - 1, v2)
                    c.pos = i + 1
                else:
                    if not _json_skip_string(c):
                        return _FAIL
                    odd = True
                    at = -1
                if not _json_colon(c):
                    return _FAIL
                if at < 0:
                    if not _json_skip_scalar(c):
                        return _FAIL
                else:
                    value = _json_ext_value(c)
                    if value is _FAIL:
                        return _FAIL
                    Py_XDECREF(v[at])
                    v[at] = NULL
                    if value is not None:  # (a null: absent, as the dict drops it)
                        Py_INCREF(value)
                        v[at] = <PyObject*>value
                more = _json_next(c)
                if more < 0:
                    return _FAIL
                if not more:
                    break
        return _raw_send_ext(c.p + start, c.pos - start, v, v2, False, not odd)
    finally:
        _release(v)


cdef object _send_header(dict ext, tuple keys, cls):
    """The header object, or ``_FAIL`` (see :func:`_send_values`)."""
    v = _send_values(ext, keys)
    if v is _FAIL:
        return _FAIL
    b, c, d, e, f, g, h, i, j, l, m = <tuple>v
    a = _get(ext, keys[0])  # checked: a str
    k = _bool(PyDict_GetItemWithError(ext, keys[10]))  # checked
    o = _new(cls)
    if keys is _V2_KEYS:
        o.a = a
        o.b = b
        o.c = c
        o.d = d
        o.e = e
        o.f = f
        o.g = g
        o.h = h
        o.i = i
        o.j = j
        o.k = k
        o.l = l
        o.m = m
        o.n = _get(ext, "n")
    else:
        o.producerGroup = a
        o.topic = b
        o.defaultTopic = c
        o.defaultTopicQueueNums = d
        o.queueId = e
        o.sysFlag = f
        o.bornTimestamp = g
        o.flag = h
        o.properties = i
        o.reconsumeTimes = j
        o.unitMode = k
        o.maxReconsumeTimes = l
        o.batch = m
    o.bname = _get(ext, "bname")
    return o


def decode_send_message_v2(ext):
    """Twin of :func:`trocket.codecs.headers.fast.decode_send_message_v2`."""
    if type(ext) is dict and _V2 is not None:
        o = _send_header(ext, _V2_KEYS, _V2)
        if o is not _FAIL:
            return o
    return _py_decode_send_message_v2(ext)


def decode_send_message(ext):
    """Twin of :func:`trocket.codecs.headers.fast.decode_send_message` (V1: the C++ client)."""
    if type(ext) is dict and _V1 is not None:
        o = _send_header(ext, _V1_KEYS, _V1)
        if o is not _FAIL:
            return o
    return _py_decode_send_message(ext)


def decode_send_fields(ext, v2):
    """Twin of :func:`trocket.codecs.headers.fast.decode_send_fields`."""
    if type(ext) is dict and (v2 is True or v2 is False) and _V2 is not None:
        o = _send_values(ext, _V2_KEYS if v2 else _V1_KEYS)  # (a plain tuple)
        if o is not _FAIL:
            return o
    return _py_decode_send_fields(ext, v2)


def command_send_fields(cmd, v2):
    """Twin of :func:`trocket.codecs.headers.fast.command_send_fields`: a send request's
    fields as the JSON decoder read them in its pass over the header, when it left the
    ext fields undecoded (no dict made); else from the dict, as decode_send_fields."""
    cdef PyObject* p
    cdef _RawExt raw
    if type(cmd) is _RC and _LAZY_EXT and (v2 is True or v2 is False) and _V2 is not None:
        p = _slot(cmd, _OFF_EXT)
        if p != NULL and type(<object>p) is _RawExt:
            raw = <_RawExt>p
            if raw.fields is not None and raw.v2 == v2:
                return raw.fields
        elif p != NULL and type(<object>p) is dict:
            o = _send_values(<dict>p, _V2_KEYS if v2 else _V1_KEYS)
            if o is not _FAIL:
                return o
    return _py_command_send_fields(cmd, v2)


# -- the hot request headers' encoders (FastCodes) -------------------------------------
#
# What a trocket client sends with every message and every pull. The pure encoders take
# the header's values on trust (their declared types) and use ``str()`` on ints; the
# twins handle the header class itself with exact ints, True/False and None where the
# class declares them, and hand anything else (a bool or an enum where an int belongs,
# a subclass, an unset or required-but-None field) to the pure one, so both give the
# same dict. They read the attributes straight from the instance's slots: an attribute
# fetch by name is most of what the encoding costs (the attrs classes are slotted; the
# offsets come from the classes' own member descriptors, the field kinds from their
# declarations, both read when first used).

#: ``str(i)`` of the small ints most int fields carry (the pure encoders' table).
cdef tuple _SMALL_TEXT = tuple([str(i) for i in range(-1, 1024)])

cdef enum:
    # what a header field holds, from its declaration (custom_header.field)
    _K_STR = 0
    _K_INT = 1  # int and long
    _K_BOOL = 2
    _K_REQUIRED = 4  # or'ed in: None makes the pure encoder (the generic one) decide


cdef class _SlotEncoder:
    """A header class's ext dict straight from its instances' slots, in declaration
    order, None left out: the dict the FastCodes encoders make of a plain instance."""
    cdef object cls
    cdef tuple keys
    cdef Py_ssize_t n
    cdef Py_ssize_t at[16]
    cdef int kind[16]

    cdef object encode(self, object o):
        """The dict, or ``_FAIL`` for what the pure encoder must decide."""
        cdef dict out = _PyDict_NewPresized(self.n)
        cdef PyObject* p
        cdef int k
        cdef Py_ssize_t i
        for i in range(self.n):
            p = _slot(o, self.at[i])
            if p == NULL:
                return _FAIL
            k = self.kind[i]
            if p == <PyObject*>None:
                if k & _K_REQUIRED:
                    return _FAIL
                continue
            k &= 3
            if k == _K_STR:
                v = <object>p
            elif k == _K_INT:
                v = _int_text(p)
            else:
                v = _bool_text(p)
            if v is _FAIL:
                return _FAIL
            out[<str>self.keys[i]] = v
        return out


#: the field kinds the slot codecs take
cdef dict _SLOT_KINDS = {"str": _K_STR, "int": _K_INT, "long": _K_INT, "bool": _K_BOOL}


cdef Py_ssize_t _field_slot(object cls, object name):
    """The offset of the plain object slot holding ``cls``'s field ``name``, or -1."""
    if cls.__getattribute__ is not object.__getattribute__:
        return -1
    for klass in cls.__mro__:
        d = klass.__dict__.get(name)
        if d is not None:
            return trocket_slot_offset(d)
    return -1


cdef _SlotEncoder _slot_encoder(cls, specs=None, bint every=False):
    """The :class:`_SlotEncoder` of header class ``cls``, or None when its instances
    are not plain slotted objects (then the pure encoder serves every call). ``specs``:
    the fields in the order to write them (default: declaration order); ``every``: a
    field set to None is for the pure encoder too, not left out."""
    from trocket.codecs.custom_header import header_fields

    cdef Py_ssize_t off
    cdef _SlotEncoder enc = _SlotEncoder()
    specs = header_fields(cls) if specs is None else specs
    if len(specs) > 16:
        return None
    for i, spec in enumerate(specs):
        off = _field_slot(cls, spec.name)
        if off <= 0 or spec.kind not in _SLOT_KINDS:
            return None
        enc.at[i] = off
        enc.kind[i] = _SLOT_KINDS[spec.kind] | (_K_REQUIRED if spec.required or every else 0)
    enc.cls = cls
    enc.keys = tuple([spec.name for spec in specs])
    enc.n = len(specs)
    return enc


cdef _SlotEncoder _V2_ENC = None
cdef _SlotEncoder _PQ_ENC = None
cdef bint _ENCODERS_LOADED = False


cdef _load_encoders():
    """The slot encoders of the classes :func:`provide` gave (none before it did)."""
    global _V2_ENC, _PQ_ENC, _ENCODERS_LOADED
    if _V2 is None:
        return
    _V2_ENC = _slot_encoder(_V2)
    _PQ_ENC = _slot_encoder(_PQ)
    _ENCODERS_LOADED = True


cdef inline PyObject* _slot(object o, Py_ssize_t at) noexcept:
    """The slot's value (borrowed), NULL when unset."""
    return (<PyObject**>((<char*><PyObject*>o) + at))[0]


cdef object _int_text(PyObject* p):
    """``str(v)`` of the exact int at ``p``; ``_FAIL`` for anything else."""
    cdef long long x
    cdef int overflow = 0
    cdef unsigned char buf[20]
    cdef Py_ssize_t n
    v = <object>p
    if type(v) is not int:
        return _FAIL
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow or x < -1:
        return str(v)
    if x <= 1023:
        return _SMALL_TEXT[x + 1]
    n = _decimal(<unsigned long long>x, buf + 20)
    s = PyUnicode_New(n, 127)
    memcpy(<unsigned char*>PyUnicode_1BYTE_DATA(s), buf + 20 - n, n)
    return s


cdef object _TRUE = True  # the objects (a bare True in Cython is a C truth value)
cdef object _FALSE = False


cdef inline object _bool_text(PyObject* p):
    """Java's spelling of True/False; ``_FAIL`` for anything else."""
    if p == <PyObject*>_TRUE:
        return "true"
    if p == <PyObject*>_FALSE:
        return "false"
    return _FAIL


# -- a typed call's answer --------------------------------------------------------------


cdef class Reply:
    """Twin of :class:`trocket.remoting.rpc.Reply` (an attrs class there): the same fields,
    repr and equality, made without a Python frame. A typed service's handler makes one
    for each answer with a body, and each sync call gets one: ~1.3k instructions less a
    time than the attrs class's ``__init__``."""

    cdef public object header
    cdef public object body

    __match_args__ = ("header", "body")
    __hash__ = None  # (as the attrs class: eq without frozen)

    def __init__(self, header, body=b""):
        self.header = header
        self.body = body

    def __repr__(self):
        return f"Reply(header={self.header!r}, body={self.body!r})"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.header, self.body) == ((<Reply>other).header, (<Reply>other).body)

    def __ne__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return not ((self.header, self.body) == ((<Reply>other).header, (<Reply>other).body))

    @classmethod
    def __class_getitem__(cls, item):
        return cls  # Reply[H] in annotations, as the pure class's Generic allows


# -- typed headers: a generated codec's decode and encode_wire -----------------------------
#
# custom_header.compiled generates, per @header class, a Python decode (ext map -> object)
# and encode_wire (object -> ext map in Java's order): what every call of a typed service
# runs twice. For a class whose objects are made by object.__new__ and one store per field,
# with str / int / long / bool fields, both run here from the fields' slots; any input they
# do not plainly take (a value that is not a str, an odd spelling, a missing required field,
# an unset or None attribute, a value of another type) goes to the generated function,
# errors included.


cdef class _TypedHeaderCodec:
    """One header class's decode and encode_wire, by its slots (see above)."""

    cdef object cls
    cdef object pure_decode
    cdef object pure_wire
    cdef _SlotEncoder wire  # the fields in Java's order, every one required
    cdef tuple keys  # declaration order
    cdef tuple defaults
    cdef dict bools
    cdef Py_ssize_t n
    cdef Py_ssize_t at[16]
    cdef int kind[16]
    cdef int digits[16]  # an int's longest plain spelling: 9 (int32) or 18 (int64)

    def decode(self, ext):
        """The generated decode's result for ``ext``."""
        cdef Py_ssize_t i
        cdef PyObject* v
        cdef PyObject* b
        cdef long long x
        cdef int k
        if type(ext) is not dict:
            return self.pure_decode(ext)
        o = trocket_alloc(self.cls)
        for i in range(self.n):
            v = PyDict_GetItem(ext, self.keys[i])
            k = self.kind[i]
            if v == NULL or v == <PyObject*>None:
                if k & _K_REQUIRED:
                    return self.pure_decode(ext)  # its missing-field error
                trocket_fill_slot(o, self.at[i], self.defaults[i])
                continue
            k &= 3
            if k == _K_STR:
                trocket_fill_slot(o, self.at[i], <object>v)
            elif k == _K_BOOL:
                b = PyDict_GetItem(self.bools, <object>v) if type(<object>v) is str else NULL
                if b == NULL:
                    return self.pure_decode(ext)
                trocket_fill_slot(o, self.at[i], <object>b)
            else:
                if not _digits(<object>v, self.digits[i], &x):
                    return self.pure_decode(ext)
                trocket_fill_slot(o, self.at[i], x)
        return o

    def __call__(self, o):
        """The generated encode_wire's result for ``o`` (the codec object is the class's
        encode_wire: encode_command then calls :meth:`wire_of` without a Python call)."""
        return self.wire_of(o)

    cdef object wire_of(self, o):
        if type(o) is self.cls:
            out = self.wire.encode(o)
            if out is not _FAIL:
                return out
        return self.pure_wire(o)


def specialize_codec(cls, specs, wire_order, direct, bools, decode, encode_wire):
    """Twin of :func:`trocket.codecs.custom_header.compiled.specialize_codec`: a
    :class:`_TypedHeaderCodec`'s two methods for a class it can serve, else the pure one's."""
    cdef _TypedHeaderCodec codec
    cdef Py_ssize_t i
    specs = tuple(specs)
    by_name = {spec.name: spec for spec in specs}
    if not direct or type(bools) is not dict or sorted(wire_order) != sorted(by_name) or len(by_name) != len(specs):
        return _py_specialize_codec(cls, specs, wire_order, direct, bools, decode, encode_wire)
    codec = _TypedHeaderCodec.__new__(_TypedHeaderCodec)
    codec.wire = _slot_encoder(cls, [by_name[name] for name in wire_order], True)
    if codec.wire is None:
        return _py_specialize_codec(cls, specs, wire_order, direct, bools, decode, encode_wire)
    for i, spec in enumerate(specs):
        codec.at[i] = _field_slot(cls, spec.name)  # (the encoder above found each one)
        codec.kind[i] = _SLOT_KINDS[spec.kind] | (_K_REQUIRED if spec.required else 0)
        codec.digits[i] = 18 if spec.kind == "long" else 9
    codec.cls = cls
    codec.pure_decode = decode
    codec.pure_wire = encode_wire
    codec.keys = tuple([str(spec.name) for spec in specs])
    codec.defaults = tuple([spec.default for spec in specs])
    codec.bools = bools
    codec.n = len(specs)
    return codec.decode, codec


cdef inline object _encode_or(_SlotEncoder enc, object o, object pure):
    """``enc``'s dict of ``o``, or what ``pure`` makes of it."""
    if enc is not None and type(o) is enc.cls:
        out = enc.encode(o)
        if out is not _FAIL:
            return out
    return pure(o)


def encode_send_message_v2(o):
    """Twin of :func:`trocket.codecs.headers.fast.encode_send_message_v2`."""
    if not _ENCODERS_LOADED:
        _load_encoders()
    return _encode_or(_V2_ENC, o, _py_encode_send_message_v2)


def encode_pull_message(o):
    """Twin of :func:`trocket.codecs.headers.fast.encode_pull_message`."""
    if not _ENCODERS_LOADED:
        _load_encoders()
    return _encode_or(_PQ_ENC, o, _py_encode_pull_message)


# -- the stored-message record --------------------------------------------------------

cdef object _ip_to_bytes = None
cdef object _crc32 = zlib.crc32
cdef object _NO_HOST = ("0.0.0.0", 0)


cdef inline void _put32(unsigned char* p, long long v) noexcept:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline void _put64(unsigned char* p, long long v) noexcept:
    _put32(p, v >> 32)
    _put32(p + 4, v)  # _put32 keeps the low 32 bits (a literal 0xFFFFFFFF mask was Python arithmetic)


cdef inline bint _fits32(long long v) noexcept:
    return -2147483648 <= v <= 2147483647


#: IPv4 text -> its 4 bytes (a record names the same two or three hosts again and again;
#: ``ip_to_bytes`` is a Python call through an lru_cache); bounded
cdef dict _IPV4 = {}


cdef object _ipv4(object host):
    """The 4 IP bytes of a host tuple (its port is checked by the caller), or ``_FAIL``."""
    cdef PyObject* hit
    if type(host) is not tuple and not isinstance(host, tuple):
        return _FAIL
    if len(<tuple>host) != 2 or type((<tuple>host)[0]) is not str or type((<tuple>host)[1]) is not int:
        return _FAIL
    ip = (<tuple>host)[0]
    hit = PyDict_GetItem(_IPV4, ip)
    if hit != NULL:
        return <object>hit
    try:
        raw = _ip_to_bytes(ip)
    except Exception:
        return _FAIL
    if type(raw) is not bytes or PyBytes_GET_SIZE(raw) != 4:
        return _FAIL
    if len(_IPV4) >= 1024:
        _IPV4.clear()
    _IPV4[ip] = raw
    return raw


def encode_record_into(
    buf,
    offset,
    *,
    topic,
    body=b"",
    properties=b"",
    queue_id=0,
    flag=0,
    queue_offset=0,
    physical_offset=0,
    sys_flag=0,
    born_timestamp=0,
    born_host=_NO_HOST,
    store_timestamp=0,
    store_host=_NO_HOST,
    reconsume_times=0,
    prepared_transaction_offset=0,
    body_crc=None,
):
    """Twin of :func:`trocket.codecs.message.record.encode_record_into` for the store's
    common case: a bytearray, bytes topic/body/properties (or str topic/properties),
    IPv4 hosts. Everything else, and every error, goes to the pure function."""
    cdef Py_ssize_t size = _record_fast(
        buf, offset, topic, body, properties, queue_id, flag, queue_offset, physical_offset, sys_flag,
        born_timestamp, born_host, store_timestamp, store_host, reconsume_times, prepared_transaction_offset,
        body_crc, -1,
    )
    if size >= 0:
        return size
    return _py_encode_record_into(
        buf, offset, topic=topic, body=body, properties=properties, queue_id=queue_id,
        flag=flag, queue_offset=queue_offset, physical_offset=physical_offset,
        sys_flag=sys_flag, born_timestamp=born_timestamp, born_host=born_host,
        store_timestamp=store_timestamp, store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset, body_crc=body_crc,
    )


def encode_store_record(
    size, topic, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host,
    reconsume_times, prepared_transaction_offset,
):
    """Twin of :func:`trocket.codecs.message.record.encode_store_record`: the record made
    in a new bytearray in one call (positional arguments: no keyword parsing per send),
    when ``size`` is the record's size and :func:`encode_record_into`'s fast path takes
    the values; anything else to the pure function."""
    cdef Py_ssize_t n
    if type(size) is not int or not 0 < size <= 0x7FFFFFFF:
        return _py_encode_store_record(size, topic, body, properties, queue_id, flag, sys_flag,
                                       born_timestamp, born_host, store_host, reconsume_times,
                                       prepared_transaction_offset)
    buf = PyByteArray_FromStringAndSize(NULL, size)
    n = _record_fast(buf, 0, topic, body, properties, queue_id, flag, 0, 0, sys_flag, born_timestamp,
                     born_host, 0, store_host, reconsume_times, prepared_transaction_offset, None, size)
    if n >= 0:
        return buf
    return _py_encode_store_record(size, topic, body, properties, queue_id, flag, sys_flag, born_timestamp,
                                   born_host, store_host, reconsume_times, prepared_transaction_offset)


cdef Py_ssize_t _record_fast(
    buf, offset, topic, body, properties, queue_id, flag, queue_offset, physical_offset, sys_flag,
    born_timestamp, born_host, store_timestamp, store_host, reconsume_times, prepared_transaction_offset,
    body_crc, Py_ssize_t exact,
) except -2:
    """The record written at ``buf[offset:]`` (a bytearray; bytes body, bytes or str topic
    and properties, IPv4 hosts, in-range values); its size, or -1 (nothing written)
    for anything else, or when ``exact`` is not -1 and not the record's size."""
    cdef long long off = 0, qid = 0, flg = 0, qoff = 0, poff = 0, sflag = 0, bts = 0, sts = 0
    cdef long long rtimes = 0, ptoff = 0, crc = 0, bport = 0, sport = 0
    cdef Py_ssize_t body_len, topic_len, props_len, size
    cdef unsigned char* w
    topic_b = props_b = born_ip = store_ip = None
    fast = type(buf) is bytearray and type(body) is bytes
    if fast:
        if type(topic) is str:
            try:
                topic_b = PyUnicode_AsUTF8String(topic)
            except UnicodeEncodeError:
                fast = False
        elif type(topic) is bytes:
            topic_b = topic
        else:
            fast = False
    if fast:
        if type(properties) is bytes:
            props_b = properties
        elif type(properties) is str:
            try:
                props_b = PyUnicode_AsUTF8String(properties)
            except UnicodeEncodeError:
                fast = False
        else:
            fast = False
    if fast:
        born_ip = _ipv4(born_host)
        store_ip = _ipv4(store_host)
        fast = born_ip is not _FAIL and store_ip is not _FAIL
    if fast:
        try:
            off = offset
            qid = queue_id
            flg = flag
            qoff = queue_offset
            poff = physical_offset
            sflag = sys_flag
            bts = born_timestamp
            sts = store_timestamp
            rtimes = reconsume_times
            ptoff = prepared_transaction_offset
            bport = (<tuple>born_host)[1]
            sport = (<tuple>store_host)[1]
            if body_crc is None:
                crc = _crc32(body) & 0x7FFFFFFF
            else:
                crc = body_crc
        except (TypeError, OverflowError):
            fast = False
    if fast and not sflag & 0x30 and (
        _fits32(qid) and _fits32(flg) and _fits32(sflag) and _fits32(rtimes)
        and _fits32(crc) and _fits32(bport) and _fits32(sport)
    ):
        body_len = PyBytes_GET_SIZE(body)
        topic_len = PyBytes_GET_SIZE(topic_b)
        props_len = PyBytes_GET_SIZE(props_b)
        size = 88 + body_len + 1 + topic_len + 2 + props_len
        if (exact == -1 or exact == size) and topic_len <= 127 and props_len <= 0x7FFF and off >= 0 \
                and PyByteArray_GET_SIZE(buf) - off >= size:
            w = <unsigned char*>PyByteArray_AS_STRING(buf) + off
            _put32(w, size)
            _put32(w + 4, 0xDAA320A7)
            _put32(w + 8, crc)
            _put32(w + 12, qid)
            _put32(w + 16, flg)
            _put64(w + 20, qoff)
            _put64(w + 28, poff)
            _put32(w + 36, sflag)
            _put64(w + 40, bts)
            memcpy(w + 48, PyBytes_AS_STRING(born_ip), 4)
            _put32(w + 52, bport)
            _put64(w + 56, sts)
            memcpy(w + 64, PyBytes_AS_STRING(store_ip), 4)
            _put32(w + 68, sport)
            _put32(w + 72, rtimes)
            _put64(w + 76, ptoff)
            _put32(w + 84, body_len)
            w += 88
            memcpy(w, PyBytes_AS_STRING(body), body_len)
            w += body_len
            w[0] = <unsigned char>topic_len
            memcpy(w + 1, PyBytes_AS_STRING(topic_b), topic_len)
            w += 1 + topic_len
            w[0] = (props_len >> 8) & 0xFF
            w[1] = props_len & 0xFF
            memcpy(w + 2, PyBytes_AS_STRING(props_b), props_len)
            return size
    return -1


cdef extern from *:
    """
    #define TROCKET_COMPILER_FENCE() __asm__ __volatile__("" ::: "memory")
    """
    void TROCKET_COMPILER_FENCE() nogil


def place_record(view, pos, record, size, queue_offset, physical_offset, ts_at, store_timestamp):
    """Twin of :func:`trocket.codecs.message.record.place_record`: a memoryview target,
    a bytearray record, in-range values; anything else to the pure function."""
    cdef Py_buffer target
    cdef long long p = 0, n = 0, qoff = 0, poff = 0, at = 0, sts = 0
    cdef unsigned char* src
    cdef unsigned char* dst
    if type(view) is not memoryview or type(record) is not bytearray:
        return _py_place_record(view, pos, record, size, queue_offset, physical_offset, ts_at, store_timestamp)
    try:
        p = pos
        n = size
        qoff = queue_offset
        poff = physical_offset
        at = ts_at
        sts = store_timestamp
    except (TypeError, OverflowError):
        return _py_place_record(view, pos, record, size, queue_offset, physical_offset, ts_at, store_timestamp)
    if n < 36 or n > PyByteArray_GET_SIZE(record) or p < 0 or at < 36 or at + 8 > n:
        return _py_place_record(view, pos, record, size, queue_offset, physical_offset, ts_at, store_timestamp)
    if PyObject_GetBuffer(view, &target, PyBUF_WRITABLE | PyBUF_SIMPLE) != 0:
        return _py_place_record(view, pos, record, size, queue_offset, physical_offset, ts_at, store_timestamp)
    try:
        if p + n > target.len:
            return _py_place_record(view, pos, record, size, queue_offset, physical_offset, ts_at, store_timestamp)
        src = <unsigned char*>PyByteArray_AS_STRING(record)
        _put64(src + 20, qoff)
        _put64(src + 28, poff)
        _put64(src + at, sts)
        dst = <unsigned char*>target.buf + p
        memcpy(dst + 4, src + 4, n - 4)
        TROCKET_COMPILER_FENCE()  # TOTALSIZE last (see the pure function): no store moves past it
        memcpy(dst, src, 4)
    finally:
        PyBuffer_Release(&target)


cdef inline long long _i64(const unsigned char* p) noexcept:
    return <long long>((<unsigned long long><unsigned int>_i32(p) << 32) | <unsigned int>_i32(p + 4))


def dispatch_fields(buf, offset=0, *, check_crc=False):
    """Twin of :func:`trocket.codecs.message.record.dispatch_fields`: a whole, consistent
    V1 record (MESSAGE_MAGIC_CODE) in a contiguous buffer, no CRC check; anything else
    (every fault included) to the pure function."""
    cdef Py_buffer b
    cdef Py_ssize_t off = 0, total, pos, body_len, topic_len, props_len, fixed, born, store
    cdef int sys_flag, born_port, store_port
    cdef const unsigned char* p
    if check_crc or type(offset) is not int:
        return _py_dispatch_fields(buf, offset, check_crc=check_crc)
    try:
        off = offset
    except OverflowError:
        return _py_dispatch_fields(buf, offset)
    if PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE) != 0:
        return _py_dispatch_fields(buf, offset)
    try:
        if off < 0 or b.len - off < 48:
            return _py_dispatch_fields(buf, offset)
        p = <const unsigned char*>b.buf + off
        total = _i32(p)
        if <unsigned int>_i32(p + 4) != 0xDAA320A7u:
            return _py_dispatch_fields(buf, offset)
        sys_flag = _i32(p + 36)
        born = 20 if sys_flag & 0x10 else 8  # BORNHOST_V6_FLAG: 16-byte IP + port
        store = 20 if sys_flag & 0x20 else 8  # STOREHOSTADDRESS_V6_FLAG
        fixed = 48 + born + 8 + store + 16
        if total < fixed + 3 or total > b.len - off:
            return _py_dispatch_fields(buf, offset)
        body_len = _i32(p + fixed - 4)
        if body_len < 0 or body_len > total - fixed:
            return _py_dispatch_fields(buf, offset)
        pos = fixed + body_len
        if pos >= total:
            return _py_dispatch_fields(buf, offset)
        topic_len = <signed char>p[pos]
        pos += 1
        if topic_len < 0 or topic_len > total - pos - 2:
            return _py_dispatch_fields(buf, offset)
        topic = _text(p + pos, topic_len)
        if topic is _FAIL:
            return _py_dispatch_fields(buf, offset)
        pos += topic_len
        props_len = <short>((p[pos] << 8) | p[pos + 1])
        pos += 2
        if props_len < 0 or pos + props_len != total:
            return _py_dispatch_fields(buf, offset)
        born_port = _i32(p + 48 + born - 4)
        store_port = _i32(p + 48 + born + 8 + store - 4)
        if not (0 <= born_port <= 0xFFFF and 0 <= store_port <= 0xFFFF):
            return _py_dispatch_fields(buf, offset)
        props = _utf8(p + pos, props_len)
        if props is _FAIL:
            return _py_dispatch_fields(buf, offset)
        return (total, topic, _i32(p + 12), _i64(p + 20), _i64(p + 28), sys_flag, _i64(p + 48 + born), props)
    finally:
        PyBuffer_Release(&b)
# -- a send's SUCCESS answer ----------------------------------------------------------


cdef inline Py_ssize_t _decimal(unsigned long long v, unsigned char* end) noexcept:
    """Write ``v`` in decimal so that it ends just before ``end``; returns its length."""
    cdef Py_ssize_t n = 0
    while True:
        n += 1
        end[-n] = <unsigned char>(48 + v % 10)
        v //= 10
        if v == 0:
            return n


cdef inline unsigned char* _put_bytes(unsigned char* w, bytes b) noexcept:
    cdef Py_ssize_t n = PyBytes_GET_SIZE(b)
    memcpy(w, PyBytes_AS_STRING(b), n)
    return w + n


def encode_send_ok(template, serialize_type, opaque, msg_id, queue_id, queue_offset):
    """Twin of :func:`trocket.codecs.send_response.encode_send_ok`: int values, a
    non-negative queue id and offset, an opaque in int32, an ASCII message id of the
    plain characters; anything else to the pure function."""
    cdef long long op, qid, qoff
    cdef int stype
    cdef Py_ssize_t m_len, q_len, o_len, op_len, hlen, ext_len, i
    cdef const unsigned char* m
    cdef unsigned char c
    cdef unsigned char digits[64]
    cdef unsigned char* q_end = digits + 20
    cdef unsigned char* o_end = digits + 40
    cdef unsigned char* op_end = digits + 60
    cdef tuple parts
    cdef bytes out
    cdef unsigned char* w
    if (type(msg_id) is not str or not PyUnicode_IS_ASCII(msg_id)
            or not _int_in(opaque, 0, 2147483647, &op)
            or not _int_in(queue_id, 0, 9223372036854775807, &qid)
            or not _int_in(queue_offset, 0, 9223372036854775807, &qoff)):
        return _py_encode_send_ok(template, serialize_type, opaque, msg_id, queue_id, queue_offset)
    try:
        stype = serialize_type
    except (TypeError, OverflowError):
        return _py_encode_send_ok(template, serialize_type, opaque, msg_id, queue_id, queue_offset)
    parts = getattr(template, "ok_parts", None)
    if parts is None or len(parts) != 5:
        return _py_encode_send_ok(template, serialize_type, opaque, msg_id, queue_id, queue_offset)
    m = PyUnicode_1BYTE_DATA(msg_id)
    m_len = PyUnicode_GET_LENGTH(msg_id)
    for i in range(m_len):  # the template's plain characters: [0-9A-Za-z,-]
        c = m[i]
        if not (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 44 or c == 45):
            return _py_encode_send_ok(template, serialize_type, opaque, msg_id, queue_id, queue_offset)
    q_len = _decimal(<unsigned long long>qid, q_end)
    o_len = _decimal(<unsigned long long>qoff, o_end)
    if stype == 0:  # JSON
        op_len = _decimal(<unsigned long long>op, op_end)
        hlen = (PyBytes_GET_SIZE(<bytes>parts[0]) + m_len + 13 + q_len + 17 + o_len
                + PyBytes_GET_SIZE(<bytes>parts[1]) + op_len + PyBytes_GET_SIZE(<bytes>parts[2]))
        if hlen > 0xFFFFFF:
            return _py_encode_send_ok(template, serialize_type, opaque, msg_id, queue_id, queue_offset)
        out = PyBytes_FromStringAndSize(NULL, 8 + hlen)
        w = <unsigned char*>PyBytes_AS_STRING(out)
        _put32(w, 4 + hlen)
        _put32(w + 4, hlen)
        w = _put_bytes(w + 8, <bytes>parts[0])
        memcpy(w, m, m_len)
        w += m_len
        memcpy(w, b'","queueId":"', 13)
        w += 13
        memcpy(w, q_end - q_len, q_len)
        w += q_len
        memcpy(w, b'","queueOffset":"', 17)
        w += 17
        memcpy(w, o_end - o_len, o_len)
        w += o_len
        w = _put_bytes(w, <bytes>parts[1])
        memcpy(w, op_end - op_len, op_len)
        w += op_len
        _put_bytes(w, <bytes>parts[2])
        return out
    if stype == 1:  # ROCKETMQ
        ext_len = <Py_ssize_t>(<long long>parts[4]) + m_len + q_len + o_len
        hlen = 21 + ext_len
        if hlen > 0xFFFFFF:
            return _py_encode_send_ok(template, serialize_type, opaque, msg_id, queue_id, queue_offset)
        out = PyBytes_FromStringAndSize(NULL, 8 + hlen)
        w = <unsigned char*>PyBytes_AS_STRING(out)
        _put32(w, 4 + hlen)
        _put32(w + 4, 0x1000000 | hlen)
        w[8] = 0  # code 0 (i16), language JAVA (u8), version 0 (i16)
        w[9] = 0
        w[10] = 0
        w[11] = 0
        w[12] = 0
        _put32(w + 13, op)
        _put32(w + 17, 1)  # flag: RPC_RESPONSE
        _put32(w + 21, 0)  # no remark
        _put32(w + 25, ext_len)
        w += 29
        memcpy(w, b"\x00\x05msgId", 7)
        _put32(w + 7, m_len)
        memcpy(w + 11, m, m_len)
        w += 11 + m_len
        memcpy(w, b"\x00\x07queueId", 9)
        _put32(w + 9, q_len)
        memcpy(w + 13, q_end - q_len, q_len)
        w += 13 + q_len
        memcpy(w, b"\x00\x0bqueueOffset", 13)
        _put32(w + 13, o_len)
        memcpy(w + 17, o_end - o_len, o_len)
        w += 17 + o_len
        _put_bytes(w, <bytes>parts[3])
        return out
    return _py_encode_send_ok(template, serialize_type, opaque, msg_id, queue_id, queue_offset)


cdef const char* _HEX_UPPER = b"0123456789ABCDEF"


def offset_msg_id(host_hex, offset):
    """Twin of :func:`trocket.codecs.message.msgid.offset_msg_id`: an ASCII str host
    part and an offset in 0..2**63-1; anything else to the pure function."""
    cdef long long v
    cdef int overflow = 0
    cdef Py_ssize_t n, i
    cdef unsigned char* w
    if type(host_hex) is not str or type(offset) is not int or not PyUnicode_IS_ASCII(host_hex):
        return _py_offset_msg_id(host_hex, offset)
    v = PyLong_AsLongLongAndOverflow(offset, &overflow)
    if overflow != 0 or v < 0:
        return _py_offset_msg_id(host_hex, offset)
    n = PyUnicode_GET_LENGTH(host_hex)
    out = PyUnicode_New(n + 16, 127)
    w = <unsigned char*>PyUnicode_1BYTE_DATA(out)
    memcpy(w, PyUnicode_1BYTE_DATA(host_hex), n)
    for i in range(n + 15, n - 1, -1):
        w[i] = _HEX_UPPER[v & 15]
        v >>= 4
    return out


# -- properties -----------------------------------------------------------------------


def get_property(props, key):
    """Twin of :func:`trocket.codecs.message.properties.get_property` for a str or bytes
    properties string and an ASCII key."""
    cdef const unsigned char* s
    cdef const unsigned char* k
    cdef Py_ssize_t n, klen, i, j, start, found, end
    if type(key) is not str or not PyUnicode_IS_ASCII(key):
        return _py_get_property(props, key)
    if type(props) is bytes:
        s = <const unsigned char*>PyBytes_AS_STRING(props)
        n = PyBytes_GET_SIZE(props)
    elif type(props) is str and PyUnicode_IS_ASCII(props):
        s = PyUnicode_1BYTE_DATA(props)
        n = PyUnicode_GET_LENGTH(props)
    else:
        return _py_get_property(props, key)
    k = PyUnicode_1BYTE_DATA(key)
    klen = PyUnicode_GET_LENGTH(key)
    # the first item that starts with key + \x01 (the key may not hold \x02: pure path)
    for i in range(klen):
        if k[i] == 2 or k[i] == 1:
            return _py_get_property(props, key)
    # the last item naming key with a non-empty value (Java's map keeps the last put)
    found = -1
    end = -1
    i = 0
    while i + klen < n:
        if s[i + klen] == 1 and (klen == 0 or (s[i] == k[0] and _same(s + i, k, klen))):
            start = i + klen + 1
            j = start
            while j < n and s[j] != 2:
                j += 1
            if j > start:
                found = start
                end = j
            i = j + 1
            continue
        # to the next item
        while i < n and s[i] != 2:
            i += 1
        i += 1
    if found < 0:
        return None
    if type(props) is str:
        return props[found:end]
    return _utf8_or_replace(s + found, end - found)


cdef inline bint _same(const unsigned char* a, const unsigned char* b, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


cdef object _utf8_or_replace(const unsigned char* p, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>p, n, "replace")


def decode_properties(text):
    """Twin of :func:`trocket.codecs.java_hashmap.decode_properties` for an ASCII
    str: items split on \\x02, the key up to the item's first \\x01, items with an empty
    key or value skipped, a repeated key keeping its last value."""
    cdef const unsigned char* s
    cdef Py_ssize_t n, start = 0, end, sep
    if type(text) is not str or not PyUnicode_IS_ASCII(text):
        return _py_decode_properties(text)
    s = PyUnicode_1BYTE_DATA(text)
    n = PyUnicode_GET_LENGTH(text)
    result = {}
    while start < n:
        end = _item_end(s, n, start, &sep)
        if sep > start and end > sep + 1:
            PyDict_SetItem(result, _text(s + start, sep - start), _text(s + sep + 1, end - sep - 1))
        start = end + 1
    return result


cdef inline Py_ssize_t _item_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t start, Py_ssize_t* sep) noexcept:
    """The end of the properties item at ``start`` (its \\x02, or ``n``); ``sep[0]``: its
    first \\x01 (-1: none)."""
    cdef Py_ssize_t end = start
    sep[0] = -1
    while end < n and s[end] != 2:
        if sep[0] < 0 and s[end] == 1:
            sep[0] = end
        end += 1
    return end


#: without_properties_bytes: at most this many keys to drop and items kept (more: the pure function)
DEF _WP_DROP = 8
DEF _WP_ITEMS = 64


def without_properties_bytes(data, drop):
    """Twin of :func:`trocket.codecs.message.properties.without_properties_bytes` for
    bytes and a frozenset of at most 8 bytes keys: the items (split on \\x02, a trailing
    one kept) whose key (up to the item's first \\x01) is not dropped, every byte as it
    was; ``data`` itself when none is."""
    cdef const unsigned char* s
    cdef const unsigned char* dp[_WP_DROP]
    cdef Py_ssize_t dl[_WP_DROP]
    cdef Py_ssize_t ks[_WP_ITEMS]
    cdef Py_ssize_t ke[_WP_ITEMS]
    cdef Py_ssize_t n, limit, start, end, kend, total = 0, w
    cdef int nd = 0, kept = 0, items = 0, i
    cdef bint trailing, dropped
    cdef unsigned char* out
    if type(data) is not bytes or type(drop) is not frozenset or len(drop) > _WP_DROP:
        return _py_without_properties_bytes(data, drop)
    for d in drop:
        if type(d) is not bytes:
            return _py_without_properties_bytes(data, drop)
        dp[nd] = <const unsigned char*>PyBytes_AS_STRING(d)
        dl[nd] = PyBytes_GET_SIZE(d)
        nd += 1
    s = <const unsigned char*>PyBytes_AS_STRING(data)
    n = PyBytes_GET_SIZE(data)
    if n == 0:
        return data
    trailing = s[n - 1] == 2
    limit = n - 1 if trailing else n
    start = 0
    while True:
        end = start
        while end < limit and s[end] != 2:
            end += 1
        kend = start
        while kend < end and s[kend] != 1:
            kend += 1
        items += 1
        dropped = False
        for i in range(nd):
            if dl[i] == kend - start and memcmp(dp[i], s + start, kend - start) == 0:
                dropped = True
                break
        if not dropped:
            if kept == _WP_ITEMS:
                return _py_without_properties_bytes(data, drop)
            ks[kept] = start
            ke[kept] = end
            total += end - start
            kept += 1
        if end >= limit:
            break
        start = end + 1
    if kept == items:
        return data
    if kept > 1:
        total += kept - 1
    if trailing and kept:
        total += 1
    result = PyBytes_FromStringAndSize(NULL, total)
    out = <unsigned char*>PyBytes_AS_STRING(result)
    w = 0
    for i in range(kept):
        if i:
            out[w] = 2
            w += 1
        memcpy(out + w, s + ks[i], ke[i] - ks[i])
        w += ke[i] - ks[i]
    if trailing and kept:
        out[w] = 2
    return result


#: send_properties: at most this many distinct keys (more: the pure function)
DEF _SP_MAX = 48
#: "CLUSTER", "WAIT", "TAGS" and their String.hashCode()
cdef bytes _K_CLUSTER = b"CLUSTER"
cdef bytes _K_WAIT = b"WAIT"
cdef bytes _K_TAGS = b"TAGS"


cdef inline unsigned int _java_hash_on(unsigned int h, const unsigned char* p, Py_ssize_t n) noexcept:
    """``String.hashCode`` of Latin-1 ``p[:n]`` going on from ``h`` (the hash of what came
    before): four bytes a step, ``h * 31**4 + ...``, the same sum modulo 2**32 as one
    byte a step but with a shorter chain of dependent multiplies."""
    cdef Py_ssize_t i = 0
    while i + 4 <= n:
        h = h * 923521u + p[i] * 29791u + p[i + 1] * 961u + p[i + 2] * 31u + p[i + 3]
        i += 4
    while i < n:
        h = 31u * h + p[i]
        i += 1
    return h


cdef inline unsigned int _java_hash(const unsigned char* p, Py_ssize_t n) noexcept:
    return _java_hash_on(0, p, n)


def send_properties(props, cluster):
    """Twin of :func:`trocket.codecs.message.properties.send_properties` for an ASCII str
    and an ASCII cluster name, at most 48 keys: the items parsed as
    ``string2messageProperties`` (a repeated key keeps its first place, its last value),
    CLUSTER put, WAIT removed, written in HashMap order (bucket of the spread
    ``String.hashCode``, insertion order within one; the capacity of the largest size);
    then the TAGS value's signed ``String.hashCode`` and the WAIT value."""
    cdef const unsigned char* s
    cdef const unsigned char* c
    cdef Py_ssize_t n, clen, start = 0, end, sep, total, w
    cdef Py_ssize_t ks[_SP_MAX]
    cdef Py_ssize_t kl[_SP_MAX]
    cdef const unsigned char* vp[_SP_MAX]
    cdef Py_ssize_t vl[_SP_MAX]
    cdef unsigned int hs[_SP_MAX]
    cdef unsigned int bucket[_SP_MAX]
    cdef int order[_SP_MAX]
    cdef int count = 0, i, j, k, live, wait_at = -1, tags_at = -1, code
    cdef unsigned int h, cap, mask
    cdef unsigned char* out
    if type(props) is not str or not PyUnicode_IS_ASCII(props) or type(cluster) is not str \
            or not PyUnicode_IS_ASCII(cluster):
        return _py_send_properties(props, cluster)
    s = PyUnicode_1BYTE_DATA(props)
    n = PyUnicode_GET_LENGTH(props)
    c = PyUnicode_1BYTE_DATA(cluster)
    clen = PyUnicode_GET_LENGTH(cluster)
    while start < n:
        end = _item_end(s, n, start, &sep)
        if sep > start and end > sep + 1:
            h = _java_hash(s + start, sep - start)
            for i in range(count):
                if hs[i] == h and kl[i] == sep - start and memcmp(s + ks[i], s + start, sep - start) == 0:
                    break
            else:
                if count == _SP_MAX - 1:  # (room for CLUSTER)
                    return _py_send_properties(props, cluster)
                i = count
                count += 1
                ks[i] = start
                kl[i] = sep - start
                hs[i] = h
            vp[i] = s + sep + 1
            vl[i] = end - sep - 1
        start = end + 1
    # CLUSTER: its value replaced in place, or a new last key
    h = _java_hash(<const unsigned char*>_K_CLUSTER, 7)
    for i in range(count):
        if hs[i] == h and kl[i] == 7 and memcmp(s + ks[i], <const char*>_K_CLUSTER, 7) == 0:
            break
    else:
        i = count
        count += 1
        ks[i] = -1  # the key is _K_CLUSTER
        kl[i] = 7
        hs[i] = h
    vp[i] = c
    vl[i] = clen
    # the table grew to fit every key before WAIT goes
    cap = 16
    while <unsigned int>count > cap * 3 // 4:
        cap *= 2
    mask = cap - 1
    live = 0
    total = 0
    for i in range(count):
        if ks[i] >= 0 and kl[i] == 4 and memcmp(s + ks[i], <const char*>_K_WAIT, 4) == 0:
            wait_at = i
            continue
        if ks[i] >= 0 and kl[i] == 4 and memcmp(s + ks[i], <const char*>_K_TAGS, 4) == 0:
            tags_at = i
        h = hs[i]
        bucket[i] = (h ^ (h >> 16)) & mask
        # insertion sort by bucket, stable: after every key of a bucket <= its own
        j = live
        while j > 0 and bucket[order[j - 1]] > bucket[i]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
        live += 1
        total += kl[i] + 1 + vl[i]
    if live > 1:
        total += live - 1
    result = PyBytes_FromStringAndSize(NULL, total)
    out = <unsigned char*>PyBytes_AS_STRING(result)
    w = 0
    for j in range(live):
        k = order[j]
        if j:
            out[w] = 2
            w += 1
        if ks[k] < 0:
            memcpy(out + w, <const char*>_K_CLUSTER, 7)
        else:
            memcpy(out + w, s + ks[k], kl[k])
        w += kl[k]
        out[w] = 1
        w += 1
        memcpy(out + w, vp[k], vl[k])
        w += vl[k]
    code = 0 if tags_at < 0 else <int>_java_hash(vp[tags_at], vl[tags_at])  # (signed, as Java's)
    if wait_at < 0:
        wait = None
    elif vl[wait_at] == 4 and memcmp(vp[wait_at], b"true", 4) == 0:
        wait = "true"  # (what the Java producer sends)
    else:
        wait = _text(vp[wait_at], vl[wait_at])
    return result, code, wait


# -- capture records ------------------------------------------------------------------


def encode_record_batch(tail, received_ns, sent_ns, role, items, out):
    """Twin of :func:`trocket.codecs.capture.encode_record_batch` for what a connection
    passes: bytes data, kinds 0 to 3, timestamps and a role that fit. Anything else goes
    to the pure function (before anything is appended to ``out``)."""
    cdef Py_ssize_t i, count, tlen, m, dlen, hsize, total = 0
    cdef long long ts_r, ts_s, n, r, limit
    cdef long kind
    cdef unsigned char* w
    if type(tail) is not bytes or type(items) is not list or type(out) is not list:
        return _py_encode_record_batch(tail, received_ns, sent_ns, role, items, out)
    count = len(<list>items)
    if count & 1 or type(received_ns) is not int or type(sent_ns) is not int or type(role) is not int:
        return _py_encode_record_batch(tail, received_ns, sent_ns, role, items, out)
    try:
        ts_r = received_ns
        ts_s = sent_ns
        r = role
    except OverflowError:
        return _py_encode_record_batch(tail, received_ns, sent_ns, role, items, out)
    tlen = PyBytes_GET_SIZE(tail)
    m = 12 + tlen
    limit = ((<long long>1) << 32) - 16 - m  # a record's length field must fit in 32 bits
    if ts_r < 0 or ts_s < 0 or r < 0 or r > 255:
        return _py_encode_record_batch(tail, received_ns, sent_ns, role, items, out)
    for i in range(0, count, 2):  # check everything first: no Python code runs in between
        k = (<list>items)[i]
        d = (<list>items)[i + 1]
        if type(k) is not int or type(d) is not bytes or PyBytes_GET_SIZE(d) > limit:
            return _py_encode_record_batch(tail, received_ns, sent_ns, role, items, out)
        try:
            kind = k
        except OverflowError:
            kind = -1
        if kind < 0 or kind > 3:
            return _py_encode_record_batch(tail, received_ns, sent_ns, role, items, out)
    for i in range(0, count, 2):
        kind = (<list>items)[i]
        d = (<list>items)[i + 1]
        dlen = PyBytes_GET_SIZE(d)
        if kind & 2:
            hsize = m + 8
            n = m + 4 + dlen
        else:
            hsize = m + 4
            n = m + dlen
        head = PyBytes_FromStringAndSize(NULL, hsize)
        w = <unsigned char*>PyBytes_AS_STRING(head)
        _put32(w, n)
        w[4] = kind & 1
        w[5] = <unsigned char>r
        w[6] = 0
        w[7] = 0
        _put64(w + 8, ts_s if kind & 1 else ts_r)
        memcpy(w + 16, PyBytes_AS_STRING(tail), tlen)
        if kind & 2:
            _put32(w + 16 + tlen, dlen)
        (<list>out).append(head)
        (<list>out).append(d)
        total += n + 4
    return total


# -- objects of the modules above the wire part ------------------------------------------


# -- String.hashCode -------------------------------------------------------------------


def java_string_hash(s):
    """Twin of :func:`trocket.codecs.java_hashmap.java_string_hash` for an ASCII str
    (the index hashes every key it stores with it)."""
    if type(s) is not str or not PyUnicode_IS_ASCII(s):
        return _py_java_string_hash(s)
    return _java_hash(PyUnicode_1BYTE_DATA(s), PyUnicode_GET_LENGTH(s))


def hashmap_properties(items, capacity):
    """Twin of :func:`trocket.codecs.java_hashmap.hashmap_properties` for a dict of at
    most 48 ASCII str keys and values and a power-of-two capacity: the items in bucket
    order (the spread ``String.hashCode`` masked), insertion order within a bucket."""
    cdef Py_ssize_t pos = 0, total = 0, w, kn, vn
    cdef PyObject* kp
    cdef PyObject* vp
    cdef PyObject* keys[_SP_MAX]
    cdef PyObject* vals[_SP_MAX]
    cdef unsigned int bucket[_SP_MAX]
    cdef int order[_SP_MAX]
    cdef int count = 0, i, j
    cdef unsigned int h, mask
    cdef long long cap
    cdef int overflow = 0
    cdef unsigned char* out
    if type(items) is not dict or type(capacity) is not int or len(items) > _SP_MAX:
        return _py_hashmap_properties(items, capacity)
    cap = PyLong_AsLongLongAndOverflow(capacity, &overflow)
    if overflow or cap <= 0 or cap > 0x40000000 or cap & (cap - 1):
        return _py_hashmap_properties(items, capacity)
    mask = <unsigned int>(cap - 1)
    while PyDict_Next(items, &pos, &kp, &vp):
        k = <object>kp
        v = <object>vp
        if type(k) is not str or type(v) is not str or not PyUnicode_IS_ASCII(k) or not PyUnicode_IS_ASCII(v):
            return _py_hashmap_properties(items, capacity)
        kn = PyUnicode_GET_LENGTH(k)
        h = _java_hash(PyUnicode_1BYTE_DATA(k), kn)
        bucket[count] = (h ^ (h >> 16)) & mask
        keys[count] = kp
        vals[count] = vp
        # insertion sort by bucket, stable: after every key of a bucket <= its own
        j = count
        while j > 0 and bucket[order[j - 1]] > bucket[count]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = count
        total += kn + 1 + PyUnicode_GET_LENGTH(v)
        count += 1
    if count > 1:
        total += count - 1
    result = PyUnicode_New(total, 127)
    out = <unsigned char*>PyUnicode_1BYTE_DATA(result)
    w = 0
    for j in range(count):
        i = order[j]
        if j:
            out[w] = 2
            w += 1
        k = <object>keys[i]
        kn = PyUnicode_GET_LENGTH(k)
        memcpy(out + w, PyUnicode_1BYTE_DATA(k), kn)
        w += kn
        out[w] = 1
        w += 1
        v = <object>vals[i]
        vn = PyUnicode_GET_LENGTH(v)
        memcpy(out + w, PyUnicode_1BYTE_DATA(v), vn)
        w += vn
    return result


# -- the index file: keys of commit-log records ------------------------------------------


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* no byte of s[:n] past 0x7F: eight bytes a step */
    static inline int trocket_ascii(const unsigned char *s, Py_ssize_t n) {
        uint64_t acc = 0, w;
        Py_ssize_t i = 0;
        for (; i + 8 <= n; i += 8) { memcpy(&w, s + i, 8); acc |= w; }
        for (; i < n; i++) acc |= s[i];
        return (acc & 0x8080808080808080ULL) == 0;
    }
    """
    bint trocket_ascii(const unsigned char* s, Py_ssize_t n) noexcept


cdef inline bint _index_props(const unsigned char* s, Py_ssize_t n, Py_ssize_t* us, Py_ssize_t* ue,
                              Py_ssize_t* ks, Py_ssize_t* ke) noexcept:
    """The value spans of the last ``UNIQ_KEY`` and the last ``KEYS`` item with a
    non-empty value in ASCII properties (``get_property``'s reading; start -1 when
    none). False when a byte is not ASCII (the pure path decodes them)."""
    cdef Py_ssize_t i = 0, j
    cdef const unsigned char* sep
    us[0] = -1
    ks[0] = -1
    if not trocket_ascii(s, n):
        return False
    while i < n:
        sep = <const unsigned char*>memchr(s + i, 2, n - i)
        j = n if sep == NULL else sep - s
        # the item is s[i:j]
        if j - i > 9 and s[i + 8] == 1 and _same(s + i, <const unsigned char*>b"UNIQ_KEY", 8):
            us[0] = i + 9
            ue[0] = j
        elif j - i > 5 and s[i + 4] == 1 and _same(s + i, <const unsigned char*>b"KEYS", 4):
            ks[0] = i + 5
            ke[0] = j
        i = j + 1
    return True


cdef inline unsigned int _abs_hash(unsigned int h) noexcept:
    """``Math.abs`` of an int hash code, 0 for ``Integer.MIN_VALUE``."""
    if h & 0x80000000u:
        h = 0u - h
        if h & 0x80000000u:
            return 0
    return h


cdef inline void _put_index_header(unsigned char* idx, long long* hdr) noexcept:
    _put64(idx, hdr[0])
    _put64(idx + 8, hdr[1])
    _put64(idx + 16, hdr[2])
    _put64(idx + 24, hdr[3])
    _put32(idx + 32, hdr[4])
    _put32(idx + 36, hdr[5])


cdef inline long long _slot_at(unsigned int key_hash, long long slot_num) noexcept:
    """Where ``key_hash``'s slot is in the file (``slot_num`` fits an int: a 32-bit
    division)."""
    return 40 + <long long>(key_hash % <unsigned int>slot_num) * 4


cdef inline bint _put_index_key(unsigned char* idx, long long slot_num, long long index_num, long long* hdr,
                                unsigned int key_hash, long long slot_at, long long phy, long long ts) noexcept:
    """``put_index_key`` on the C copy of the header (``slot_at``: :func:`_slot_at`)."""
    cdef long long count = hdr[5], prev, diff
    cdef unsigned char* slot
    cdef unsigned char* entry
    if count >= index_num:
        return False
    slot = idx + slot_at
    entry = idx + 40 + slot_num * 4 + count * 20
    prev = _i32(slot)
    if prev >= count:
        if prev == count:
            prev = _i32(entry + 16)
        if prev <= 0 or prev >= count:
            prev = 0
    elif prev < 0:
        prev = 0
    if hdr[0] <= 0:
        diff = 0
    else:
        diff = ts - hdr[0]
        if diff < 0:
            diff = 0
        diff = diff // 1000
        if diff > 2147483647:
            diff = 2147483647
    _put32(entry, <int>key_hash)
    _put64(entry + 4, phy)
    _put32(entry + 12, diff)
    _put32(entry + 16, prev)
    _put32(slot, count)
    if count <= 1:
        hdr[2] = phy
        hdr[0] = ts
    if prev == 0:
        hdr[4] += 1
    hdr[5] = count + 1
    hdr[3] = phy
    hdr[1] = ts
    _put_index_header(idx, hdr)
    return True


cdef enum:
    _INDEX_AHEAD = 16  # keys whose slots are prefetched before the first of them is put


cdef struct _PendingKey:
    unsigned int key_hash
    long long slot_at
    long long phy
    long long ts


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define trocket_prefetch_w(p) __builtin_prefetch((p), 1, 1)
    #else
    #define trocket_prefetch_w(p) ((void)(p))
    #endif
    """
    void trocket_prefetch_w(const void* p) noexcept


cdef inline int _put_pending(unsigned char* idx, long long slot_num, long long index_num, long long* hdr,
                             _PendingKey* pending, int n) noexcept:
    """Put the queued keys in the order they came (each surely fits); returns 0."""
    cdef int i
    for i in range(n):
        _put_index_key(idx, slot_num, index_num, hdr, pending[i].key_hash, pending[i].slot_at, pending[i].phy,
                       pending[i].ts)
    return 0


cdef inline int _queue_key(unsigned char* idx, long long slot_num, long long index_num, long long* hdr,
                           _PendingKey* pending, int n, unsigned int key_hash, long long phy,
                           long long ts) noexcept:
    """Queue one key (its slot prefetched), putting the queue first when it is full;
    returns the queue's new length."""
    cdef long long slot_at = _slot_at(key_hash, slot_num)
    if n == _INDEX_AHEAD:
        n = _put_pending(idx, slot_num, index_num, hdr, pending, n)
    trocket_prefetch_w(idx + slot_at)
    pending[n].key_hash = key_hash
    pending[n].slot_at = slot_at
    pending[n].phy = phy
    pending[n].ts = ts
    return n + 1


def index_records(log, pos, limit, index, slot_num, index_num, header, max_records):
    """Twin of :func:`trocket.codecs.message.index.index_records` for whole, valid V1
    records with ASCII topics and properties; at anything else it hands the rest of the
    run (from that record, the header as it then is) to the pure function."""
    cdef Py_buffer lb, ib
    cdef long long hdr[6]
    cdef long long p_at, lim, slots, entries, most, records = 0, keys_put = 0, total, status = 0
    cdef long long phy, ts, fixed, body_len, at, topic_len, props_len, nkeys
    cdef Py_ssize_t i, j, uend = 0, kend = 0, ustart, kstart
    cdef int sys_flag, born, store, overflow = 0
    cdef unsigned int th, h
    cdef const unsigned char* p
    cdef const unsigned char* topic
    cdef const unsigned char* props
    cdef const unsigned char* sep
    cdef unsigned char* idx
    cdef bint handed = False, queued
    cdef _PendingKey pending[_INDEX_AHEAD]
    cdef int npending = 0
    if not (type(pos) is int and type(limit) is int and type(slot_num) is int and type(index_num) is int
            and type(max_records) is int and type(header) is list and len(header) == 6):
        return _py_index_records(log, pos, limit, index, slot_num, index_num, header, max_records)
    for i in range(6):
        if type(header[i]) is not int:
            return _py_index_records(log, pos, limit, index, slot_num, index_num, header, max_records)
        hdr[i] = PyLong_AsLongLongAndOverflow(header[i], &overflow)
        if overflow:
            return _py_index_records(log, pos, limit, index, slot_num, index_num, header, max_records)
    p_at = PyLong_AsLongLongAndOverflow(pos, &overflow)
    lim = PyLong_AsLongLongAndOverflow(limit, &overflow) if not overflow else 0
    slots = PyLong_AsLongLongAndOverflow(slot_num, &overflow) if not overflow else 0
    entries = PyLong_AsLongLongAndOverflow(index_num, &overflow) if not overflow else 0
    most = PyLong_AsLongLongAndOverflow(max_records, &overflow) if not overflow else 0
    if (overflow or p_at < 0 or slots <= 0 or slots > 0x7FFFFFFF or entries <= 0 or entries > 0x7FFFFFFF
            or hdr[4] < -0x80000000LL or hdr[4] > 0x7FFFFFFF or hdr[5] < 0 or hdr[5] > 0x7FFFFFFF):
        return _py_index_records(log, pos, limit, index, slot_num, index_num, header, max_records)
    if PyObject_GetBuffer(log, &lb, PyBUF_SIMPLE) != 0:
        return _py_index_records(log, pos, limit, index, slot_num, index_num, header, max_records)
    if PyObject_GetBuffer(index, &ib, PyBUF_WRITABLE) != 0:
        PyBuffer_Release(&lb)
        return _py_index_records(log, pos, limit, index, slot_num, index_num, header, max_records)
    try:
        if ib.len < 40 + slots * 4 + entries * 20:
            handed = True
        idx = <unsigned char*>ib.buf
        if lim > lb.len:
            lim = lb.len  # the pure path's reads stop at the buffer's end too: it raises there
            handed = True
        while not handed and records < most and p_at + 8 <= lim:
            p = <const unsigned char*>lb.buf + p_at
            total = _i32(p)
            if <unsigned int>_i32(p + 4) == 0xCBD43194u:
                status = 2
                break
            if <unsigned int>_i32(p + 4) != 0xDAA320A7u or total < 48 or p_at + total > lim:
                handed = True
                break
            sys_flag = _i32(p + 36)
            born = 20 if sys_flag & 0x10 else 8
            store = 20 if sys_flag & 0x20 else 8
            fixed = 48 + born + 8 + store + 16
            if total < fixed + 3:
                handed = True
                break
            body_len = _i32(p + fixed - 4)
            if body_len < 0 or body_len > total - fixed:
                handed = True
                break
            at = fixed + body_len
            if at >= total:
                handed = True
                break
            topic_len = <signed char>p[at]
            at += 1
            if topic_len < 0 or topic_len > total - at - 2:
                handed = True
                break
            topic = p + at
            at += topic_len
            props_len = <short>((p[at] << 8) | p[at + 1])
            at += 2
            if props_len < 0 or at + props_len != total:
                handed = True
                break
            if not (0 <= _i32(p + 48 + born - 4) <= 0xFFFF and 0 <= _i32(p + 48 + born + 8 + store - 4) <= 0xFFFF):
                handed = True
                break
            props = p + at
            if not trocket_ascii(topic, topic_len) or not _index_props(props, props_len, &ustart, &uend, &kstart, &kend):
                handed = True
                break
            if (sys_flag & 0xC) != 0xC and props_len > 0:
                phy = _i64(p + 28)
                ts = _i64(p + 48 + born)
                nkeys = 1 if ustart >= 0 else 0
                if kstart >= 0:
                    i = kstart
                    while i < kend:
                        if props[i] != 32 and (i == kstart or props[i - 1] == 32):
                            nkeys += 1
                        i += 1
                # the keys go into a short queue whose slots are prefetched, put in order when
                # it fills (the slots are random reads of a 20 MB table: a cache and TLB miss
                # each); only while they surely fit, so every queued put succeeds; near a full
                # file, the queue is emptied and each put is made and checked at once
                queued = hdr[5] + npending + nkeys <= entries
                if not queued:
                    npending = _put_pending(idx, slots, entries, hdr, pending, npending)
                if hdr[5] + nkeys > entries and hdr[5] > 1:
                    status = 1
                    break
                th = 31u * _java_hash(topic, topic_len) + 35u  # '#'
                if ustart >= 0:
                    h = _abs_hash(_java_hash_on(th, props + ustart, uend - ustart))
                    if queued:
                        npending = _queue_key(idx, slots, entries, hdr, pending, npending, h, phy, ts)
                        keys_put += 1
                    elif _put_index_key(idx, slots, entries, hdr, h, _slot_at(h, slots), phy, ts):
                        keys_put += 1
                    else:
                        kstart = -1
                if kstart >= 0:
                    i = kstart
                    while i < kend:
                        if props[i] == 32:
                            i += 1
                            continue
                        sep = <const unsigned char*>memchr(props + i, 32, kend - i)
                        j = kend if sep == NULL else sep - props
                        h = _abs_hash(_java_hash_on(th, props + i, j - i))
                        if queued:
                            npending = _queue_key(idx, slots, entries, hdr, pending, npending, h, phy, ts)
                        elif not _put_index_key(idx, slots, entries, hdr, h, _slot_at(h, slots), phy, ts):
                            break
                        keys_put += 1
                        i = j
            records += 1
            p_at += total
        _put_pending(idx, slots, entries, hdr, pending, npending)
    finally:
        PyBuffer_Release(&ib)
        PyBuffer_Release(&lb)
    for i in range(6):
        header[i] = hdr[i]
    if handed:
        rest = _py_index_records(log, p_at, limit, index, slot_num, index_num, header, max_records - records)
        return (rest[0], records + rest[1], keys_put + rest[2], rest[3])
    return (p_at, records, keys_put, status)


# -- ACL: HMAC-SHA1 of a request's signed fields ------------------------------------------

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    typedef struct { uint32_t h[5]; unsigned char buf[64]; size_t used; uint64_t total; } trocket_sha1;
    #define TR_ROL(v, n) (((v) << (n)) | ((v) >> (32 - (n))))
    /* the SHA-1 compression function, unrolled (after Steve Reid's public-domain SHA-1) */
    #if defined(__GNUC__) || defined(__clang__)
    static inline uint32_t trocket_be32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return __builtin_bswap32(v); }
    #else
    static inline uint32_t trocket_be32(const unsigned char *p) {
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    }
    #endif
    #define TR_BLK0(i) (l[i] = trocket_be32(p + 4*(i)))
    #define TR_BLK(i) (l[(i)&15] = TR_ROL(l[((i)+13)&15] ^ l[((i)+8)&15] ^ l[((i)+2)&15] ^ l[(i)&15], 1))
    #define TR_R0(v,w,x,y,z,i) z += ((w&(x^y))^y) + TR_BLK0(i) + 0x5A827999u + TR_ROL(v,5); w = TR_ROL(w,30);
    #define TR_R1(v,w,x,y,z,i) z += ((w&(x^y))^y) + TR_BLK(i) + 0x5A827999u + TR_ROL(v,5); w = TR_ROL(w,30);
    #define TR_R2(v,w,x,y,z,i) z += (w^x^y) + TR_BLK(i) + 0x6ED9EBA1u + TR_ROL(v,5); w = TR_ROL(w,30);
    #define TR_R3(v,w,x,y,z,i) z += (((w|x)&y)|(w&x)) + TR_BLK(i) + 0x8F1BBCDCu + TR_ROL(v,5); w = TR_ROL(w,30);
    #define TR_R4(v,w,x,y,z,i) z += (w^x^y) + TR_BLK(i) + 0xCA62C1D6u + TR_ROL(v,5); w = TR_ROL(w,30);
    static void trocket_sha1_block_c(uint32_t *h, const unsigned char *p) {
        uint32_t l[16], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        TR_R0(a,b,c,d,e, 0) TR_R0(e,a,b,c,d, 1) TR_R0(d,e,a,b,c, 2) TR_R0(c,d,e,a,b, 3)
        TR_R0(b,c,d,e,a, 4) TR_R0(a,b,c,d,e, 5) TR_R0(e,a,b,c,d, 6) TR_R0(d,e,a,b,c, 7)
        TR_R0(c,d,e,a,b, 8) TR_R0(b,c,d,e,a, 9) TR_R0(a,b,c,d,e,10) TR_R0(e,a,b,c,d,11)
        TR_R0(d,e,a,b,c,12) TR_R0(c,d,e,a,b,13) TR_R0(b,c,d,e,a,14) TR_R0(a,b,c,d,e,15)
        TR_R1(e,a,b,c,d,16) TR_R1(d,e,a,b,c,17) TR_R1(c,d,e,a,b,18) TR_R1(b,c,d,e,a,19)
        TR_R2(a,b,c,d,e,20) TR_R2(e,a,b,c,d,21) TR_R2(d,e,a,b,c,22) TR_R2(c,d,e,a,b,23)
        TR_R2(b,c,d,e,a,24) TR_R2(a,b,c,d,e,25) TR_R2(e,a,b,c,d,26) TR_R2(d,e,a,b,c,27)
        TR_R2(c,d,e,a,b,28) TR_R2(b,c,d,e,a,29) TR_R2(a,b,c,d,e,30) TR_R2(e,a,b,c,d,31)
        TR_R2(d,e,a,b,c,32) TR_R2(c,d,e,a,b,33) TR_R2(b,c,d,e,a,34) TR_R2(a,b,c,d,e,35)
        TR_R2(e,a,b,c,d,36) TR_R2(d,e,a,b,c,37) TR_R2(c,d,e,a,b,38) TR_R2(b,c,d,e,a,39)
        TR_R3(a,b,c,d,e,40) TR_R3(e,a,b,c,d,41) TR_R3(d,e,a,b,c,42) TR_R3(c,d,e,a,b,43)
        TR_R3(b,c,d,e,a,44) TR_R3(a,b,c,d,e,45) TR_R3(e,a,b,c,d,46) TR_R3(d,e,a,b,c,47)
        TR_R3(c,d,e,a,b,48) TR_R3(b,c,d,e,a,49) TR_R3(a,b,c,d,e,50) TR_R3(e,a,b,c,d,51)
        TR_R3(d,e,a,b,c,52) TR_R3(c,d,e,a,b,53) TR_R3(b,c,d,e,a,54) TR_R3(a,b,c,d,e,55)
        TR_R3(e,a,b,c,d,56) TR_R3(d,e,a,b,c,57) TR_R3(c,d,e,a,b,58) TR_R3(b,c,d,e,a,59)
        TR_R4(a,b,c,d,e,60) TR_R4(e,a,b,c,d,61) TR_R4(d,e,a,b,c,62) TR_R4(c,d,e,a,b,63)
        TR_R4(b,c,d,e,a,64) TR_R4(a,b,c,d,e,65) TR_R4(e,a,b,c,d,66) TR_R4(d,e,a,b,c,67)
        TR_R4(c,d,e,a,b,68) TR_R4(b,c,d,e,a,69) TR_R4(a,b,c,d,e,70) TR_R4(e,a,b,c,d,71)
        TR_R4(d,e,a,b,c,72) TR_R4(c,d,e,a,b,73) TR_R4(b,c,d,e,a,74) TR_R4(a,b,c,d,e,75)
        TR_R4(e,a,b,c,d,76) TR_R4(d,e,a,b,c,77) TR_R4(c,d,e,a,b,78) TR_R4(b,c,d,e,a,79)
        h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
    }
    #if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    #include <immintrin.h>
    #include <cpuid.h>
    /* the same compression with the CPU's SHA extensions (SHA-NI), after Intel's and
       Jeffrey Walton's public-domain sha1-x86.c; chosen at run time when the CPU has them */
    __attribute__((target("sha,sse4.1")))
    static void trocket_sha1_blocks_ni(uint32_t *h, const unsigned char *p, size_t count) {
        __m128i abcd, abcd_save, e0, e0_save, e1, m0, m1, m2, m3;
        const __m128i mask = _mm_set_epi64x(0x0001020304050607ULL, 0x08090a0b0c0d0e0fULL);
        abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)h), 0x1B);
        e0 = _mm_set_epi32((int)h[4], 0, 0, 0);
        for (; count; count--, p += 64) {
        abcd_save = abcd; e0_save = e0;
        m0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 0)), mask);
        e0 = _mm_add_epi32(e0, m0); e1 = abcd; abcd = _mm_sha1rnds4_epu32(abcd, e0, 0);
        m1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16)), mask);
        e1 = _mm_sha1nexte_epu32(e1, m1); e0 = abcd; abcd = _mm_sha1rnds4_epu32(abcd, e1, 0);
        m0 = _mm_sha1msg1_epu32(m0, m1);
        m2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 32)), mask);
        e0 = _mm_sha1nexte_epu32(e0, m2); e1 = abcd; abcd = _mm_sha1rnds4_epu32(abcd, e0, 0);
        m1 = _mm_sha1msg1_epu32(m1, m2); m0 = _mm_xor_si128(m0, m2);
        m3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 48)), mask);
        e1 = _mm_sha1nexte_epu32(e1, m3); e0 = abcd; m0 = _mm_sha1msg2_epu32(m0, m3);
        abcd = _mm_sha1rnds4_epu32(abcd, e1, 0); m2 = _mm_sha1msg1_epu32(m2, m3); m1 = _mm_xor_si128(m1, m3);
        e0 = _mm_sha1nexte_epu32(e0, m0); e1 = abcd; m1 = _mm_sha1msg2_epu32(m1, m0);
        abcd = _mm_sha1rnds4_epu32(abcd, e0, 0); m3 = _mm_sha1msg1_epu32(m3, m0); m2 = _mm_xor_si128(m2, m0);
        e1 = _mm_sha1nexte_epu32(e1, m1); e0 = abcd; m2 = _mm_sha1msg2_epu32(m2, m1);
        abcd = _mm_sha1rnds4_epu32(abcd, e1, 1); m0 = _mm_sha1msg1_epu32(m0, m1); m3 = _mm_xor_si128(m3, m1);
        e0 = _mm_sha1nexte_epu32(e0, m2); e1 = abcd; m3 = _mm_sha1msg2_epu32(m3, m2);
        abcd = _mm_sha1rnds4_epu32(abcd, e0, 1); m1 = _mm_sha1msg1_epu32(m1, m2); m0 = _mm_xor_si128(m0, m2);
        e1 = _mm_sha1nexte_epu32(e1, m3); e0 = abcd; m0 = _mm_sha1msg2_epu32(m0, m3);
        abcd = _mm_sha1rnds4_epu32(abcd, e1, 1); m2 = _mm_sha1msg1_epu32(m2, m3); m1 = _mm_xor_si128(m1, m3);
        e0 = _mm_sha1nexte_epu32(e0, m0); e1 = abcd; m1 = _mm_sha1msg2_epu32(m1, m0);
        abcd = _mm_sha1rnds4_epu32(abcd, e0, 1); m3 = _mm_sha1msg1_epu32(m3, m0); m2 = _mm_xor_si128(m2, m0);
        e1 = _mm_sha1nexte_epu32(e1, m1); e0 = abcd; m2 = _mm_sha1msg2_epu32(m2, m1);
        abcd = _mm_sha1rnds4_epu32(abcd, e1, 1); m0 = _mm_sha1msg1_epu32(m0, m1); m3 = _mm_xor_si128(m3, m1);
        e0 = _mm_sha1nexte_epu32(e0, m2); e1 = abcd; m3 = _mm_sha1msg2_epu32(m3, m2);
        abcd = _mm_sha1rnds4_epu32(abcd, e0, 2); m1 = _mm_sha1msg1_epu32(m1, m2); m0 = _mm_xor_si128(m0, m2);
        e1 = _mm_sha1nexte_epu32(e1, m3); e0 = abcd; m0 = _mm_sha1msg2_epu32(m0, m3);
        abcd = _mm_sha1rnds4_epu32(abcd, e1, 2); m2 = _mm_sha1msg1_epu32(m2, m3); m1 = _mm_xor_si128(m1, m3);
        e0 = _mm_sha1nexte_epu32(e0, m0); e1 = abcd; m1 = _mm_sha1msg2_epu32(m1, m0);
        abcd = _mm_sha1rnds4_epu32(abcd, e0, 2); m3 = _mm_sha1msg1_epu32(m3, m0); m2 = _mm_xor_si128(m2, m0);
        e1 = _mm_sha1nexte_epu32(e1, m1); e0 = abcd; m2 = _mm_sha1msg2_epu32(m2, m1);
        abcd = _mm_sha1rnds4_epu32(abcd, e1, 2); m0 = _mm_sha1msg1_epu32(m0, m1); m3 = _mm_xor_si128(m3, m1);
        e0 = _mm_sha1nexte_epu32(e0, m2); e1 = abcd; m3 = _mm_sha1msg2_epu32(m3, m2);
        abcd = _mm_sha1rnds4_epu32(abcd, e0, 2); m1 = _mm_sha1msg1_epu32(m1, m2); m0 = _mm_xor_si128(m0, m2);
        e1 = _mm_sha1nexte_epu32(e1, m3); e0 = abcd; m0 = _mm_sha1msg2_epu32(m0, m3);
        abcd = _mm_sha1rnds4_epu32(abcd, e1, 3); m2 = _mm_sha1msg1_epu32(m2, m3); m1 = _mm_xor_si128(m1, m3);
        e0 = _mm_sha1nexte_epu32(e0, m0); e1 = abcd; m1 = _mm_sha1msg2_epu32(m1, m0);
        abcd = _mm_sha1rnds4_epu32(abcd, e0, 3); m3 = _mm_sha1msg1_epu32(m3, m0); m2 = _mm_xor_si128(m2, m0);
        e1 = _mm_sha1nexte_epu32(e1, m1); e0 = abcd; m2 = _mm_sha1msg2_epu32(m2, m1);
        abcd = _mm_sha1rnds4_epu32(abcd, e1, 3); m3 = _mm_xor_si128(m3, m1);
        e0 = _mm_sha1nexte_epu32(e0, m2); e1 = abcd; m3 = _mm_sha1msg2_epu32(m3, m2);
        abcd = _mm_sha1rnds4_epu32(abcd, e0, 3);
        e1 = _mm_sha1nexte_epu32(e1, m3); e0 = abcd; abcd = _mm_sha1rnds4_epu32(abcd, e1, 3);
        e0 = _mm_sha1nexte_epu32(e0, e0_save); abcd = _mm_add_epi32(abcd, abcd_save);
        }
        _mm_storeu_si128((__m128i *)h, _mm_shuffle_epi32(abcd, 0x1B));
        h[4] = (uint32_t)_mm_extract_epi32(e0, 3);
    }
    static int trocket_sha_ni = -1;
    static int trocket_cpu_has_sha_ni(void) {
        unsigned int a, b, c, d;
        if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return 0;
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
        return (b >> 29) & 1;
    }
    static void trocket_sha1_blocks(uint32_t *h, const unsigned char *p, size_t count) {
        if (trocket_sha_ni < 0) trocket_sha_ni = trocket_cpu_has_sha_ni();
        if (trocket_sha_ni) trocket_sha1_blocks_ni(h, p, count);
        else for (; count; count--, p += 64) trocket_sha1_block_c(h, p);
    }
    /* force: 0 the portable compression, 1 SHA-NI where the CPU has it, -1 as it is;
       returns 1 when SHA-NI is in use (tests run both) */
    static int trocket_sha1_engine(int force) {
        if (force == 0) trocket_sha_ni = 0;
        else if (force == 1 || trocket_sha_ni < 0) trocket_sha_ni = trocket_cpu_has_sha_ni();
        return trocket_sha_ni;
    }
    #else
    static void trocket_sha1_blocks(uint32_t *h, const unsigned char *p, size_t count) {
        for (; count; count--, p += 64) trocket_sha1_block_c(h, p);
    }
    static int trocket_sha1_engine(int force) { (void)force; return 0; }
    #endif
    /* a state that already took one 64-byte block (an HMAC pad) */
    static void trocket_sha1_resume(trocket_sha1 *s, const uint32_t *mid) {
        memcpy(s->h, mid, 20); s->used = 0; s->total = 64;
    }
    static void trocket_sha1_update(trocket_sha1 *s, const unsigned char *p, size_t n) {
        s->total += n;
        if (s->used) {
            size_t take = 64 - s->used < n ? 64 - s->used : n;
            memcpy(s->buf + s->used, p, take); s->used += take; p += take; n -= take;
            if (s->used < 64) return;
            trocket_sha1_blocks(s->h, s->buf, 1); s->used = 0;
        }
        if (n >= 64) { trocket_sha1_blocks(s->h, p, n / 64); p += n & ~(size_t)63; n &= 63; }
        memcpy(s->buf, p, n); s->used = n;
    }
    static void trocket_sha1_final(trocket_sha1 *s, unsigned char *out) {
        uint64_t bits = s->total * 8; int i;
        s->buf[s->used++] = 0x80;
        if (s->used > 56) { memset(s->buf + s->used, 0, 64 - s->used); trocket_sha1_blocks(s->h, s->buf, 1); s->used = 0; }
        memset(s->buf + s->used, 0, 56 - s->used);
        for (i = 0; i < 8; i++) s->buf[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
        trocket_sha1_blocks(s->h, s->buf, 1);
        for (i = 0; i < 5; i++) {
            uint32_t v = s->h[i];
            out[4 * i] = (unsigned char)(v >> 24); out[4 * i + 1] = (unsigned char)(v >> 16);
            out[4 * i + 2] = (unsigned char)(v >> 8); out[4 * i + 3] = (unsigned char)v;
        }
    }
    static void trocket_sha1_mid(const unsigned char *padded, unsigned char x, uint32_t *mid) {
        unsigned char block[64]; int i;
        static const uint32_t init[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
        for (i = 0; i < 64; i++) block[i] = padded[i] ^ x;
        memcpy(mid, init, 20);
        trocket_sha1_blocks(mid, block, 1);
    }
    """
    ctypedef unsigned int uint32_t
    ctypedef struct trocket_sha1:
        pass
    void trocket_sha1_resume(trocket_sha1* s, const uint32_t* mid) noexcept
    void trocket_sha1_update(trocket_sha1* s, const unsigned char* p, size_t n) noexcept
    void trocket_sha1_final(trocket_sha1* s, unsigned char* out) noexcept
    void trocket_sha1_mid(const unsigned char* padded, unsigned char x, uint32_t* mid) noexcept
    int trocket_sha1_engine(int force) noexcept

def _sha1_engine(force=None):
    """The SHA-1 compression :func:`signature_matches` uses: "sha-ni" (the CPU's SHA
    extensions, picked at first use where the CPU has them) or "portable"; ``force``
    ("sha-ni" or "portable") switches it, for tests that run both."""
    mode = -1 if force is None else 1 if force == "sha-ni" else 0 if force == "portable" else -2
    if mode == -2:
        raise ValueError(f"unknown SHA-1 engine {force!r}")
    return "sha-ni" if trocket_sha1_engine(mode) else "portable"


cdef struct _HmacKey:
    uint32_t inner[5]
    uint32_t outer[5]

#: padded HMAC key (bytes) -> its two SHA-1 midstates (_HmacKey as bytes); bounded
cdef dict _hmac_keys = {}
cdef const char* _B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


cdef bytes _hmac_key(object padded):
    cdef _HmacKey k
    cdef object hit = _hmac_keys.get(padded)
    if hit is not None:
        return <bytes>hit
    if type(padded) is not bytes or PyBytes_GET_SIZE(padded) != 64:
        return None
    trocket_sha1_mid(<const unsigned char*>PyBytes_AS_STRING(padded), 0x36, k.inner)
    trocket_sha1_mid(<const unsigned char*>PyBytes_AS_STRING(padded), 0x5C, k.outer)
    if len(_hmac_keys) >= 256:
        _hmac_keys.clear()
    hit = PyBytes_FromStringAndSize(<const char*>&k, sizeof(_HmacKey))
    _hmac_keys[padded] = hit
    return <bytes>hit


#: with the portable compression, a body past this goes the pure way: OpenSSL's SHA-1
#: (SIMD, SHA-NI where the CPU has it) is faster there; below, this one wins by skipping
#: OpenSSL's context copies (timeit on a SHA-NI CPU, portable / OpenSSL: 0.43 / 1.24 us at
#: 128 bytes, 2.05 / 2.22 at 2 KiB, 5.11 / 5.05 at 8 KiB). With SHA-NI this one is never
#: slower (0.29 / 1.24 at 128 bytes, 1.24 / 2.22 at 2 KiB), so every body is hashed here.
DEF _HMAC_C_MAX_BODY = 2048
#: the signed values are copied together up to this many bytes before they are hashed
#: (one SHA-1 update instead of one per value)
DEF _GATHER = 512


cdef int _signature_check(dict ext_fields, tuple signed, object body, object key, object signature):
    """:func:`signature_matches` on the compiled path: 1 the signature matches, 0 it does
    not, -1 the names are not ``signed`` (the pure function's None), -2 an input this
    path does not take (the caller hands it to the pure function)."""
    cdef trocket_sha1 st
    cdef const _HmacKey* k
    cdef unsigned char digest[20]
    cdef unsigned char b64[28]
    cdef unsigned char gathered[_GATHER]
    cdef const unsigned char* sig
    cdef const char* data
    cdef Py_ssize_t n, i, j, unsigned_n, used = 0
    cdef unsigned int v, diff
    cdef PyObject* item
    cdef object kbytes
    if (not (body is None or type(body) is bytes)
            or type(signature) is not str or not PyUnicode_IS_ASCII(signature)
            or body is not None and PyBytes_GET_SIZE(body) > _HMAC_C_MAX_BODY and not trocket_sha1_engine(-1)):
        return -2
    unsigned_n = (SIGNATURE_KEY in ext_fields) + (UNIQUE_KEY_QUERY in ext_fields)
    if len(ext_fields) != len(signed) + unsigned_n:
        return -1
    kbytes = _hmac_key(getattr(key, "padded", None))
    if kbytes is None:
        return -2
    k = <const _HmacKey*>PyBytes_AS_STRING(kbytes)
    trocket_sha1_resume(&st, k.inner)
    for name in signed:  # each value looked up once, gathered (short ones) and hashed in order
        item = PyDict_GetItemWithError(ext_fields, name)
        if item is NULL:
            return -1
        value = <object>item
        if type(value) is not str:
            return -2
        if PyUnicode_IS_ASCII(value):
            data = <const char*>PyUnicode_1BYTE_DATA(value)
            n = PyUnicode_GET_LENGTH(value)
        else:
            try:
                data = PyUnicode_AsUTF8AndSize(value, &n)
            except UnicodeError:  # a lone surrogate: the pure path's own error
                return -2
        if used + n <= _GATHER:  # a send's values are short: one update for all of them
            memcpy(&gathered[used], data, n)
            used += n
        else:
            if used:
                trocket_sha1_update(&st, gathered, used)
                used = 0
            trocket_sha1_update(&st, <const unsigned char*>data, n)
    if used:
        trocket_sha1_update(&st, gathered, used)
    if body is not None:
        trocket_sha1_update(&st, <const unsigned char*>PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body))
    trocket_sha1_final(&st, digest)
    trocket_sha1_resume(&st, k.outer)
    trocket_sha1_update(&st, digest, 20)
    trocket_sha1_final(&st, digest)
    # base64 of 20 bytes: 28 characters, the last one "="
    j = 0
    for i in range(0, 18, 3):
        v = (digest[i] << 16) | (digest[i + 1] << 8) | digest[i + 2]
        b64[j] = _B64[v >> 18]
        b64[j + 1] = _B64[(v >> 12) & 63]
        b64[j + 2] = _B64[(v >> 6) & 63]
        b64[j + 3] = _B64[v & 63]
        j += 4
    v = (digest[18] << 16) | (digest[19] << 8)
    b64[24] = _B64[v >> 18]
    b64[25] = _B64[(v >> 12) & 63]
    b64[26] = _B64[(v >> 6) & 63]
    b64[27] = 61  # "="
    if PyUnicode_GET_LENGTH(signature) != 28:
        return 0
    sig = PyUnicode_1BYTE_DATA(signature)
    diff = 0
    for i in range(28):  # every byte compared: no early exit on the first difference
        diff |= b64[i] ^ sig[i]
    return diff == 0


def signature_matches(ext_fields, tuple signed, body, key, signature):
    """Twin of :func:`trocket.codecs.acl.signature_matches` for a decoded request: a
    dict of str values, a bytes body (or None; past 2 KiB only with SHA-NI), an ASCII
    signature; the HMAC-SHA1 is computed here from the key's two midstates (kept per
    key), the values' UTF-8 fed as they are, with no joined string."""
    cdef int r = -2
    if type(ext_fields) is dict:
        r = _signature_check(<dict>ext_fields, signed, body, key, signature)
    if r == -2:
        return _py_signature_matches(ext_fields, signed, body, key, signature)
    return None if r == -1 else r == 1


cdef str ACCESS_KEY_KEY = "AccessKey"
cdef str SEND_TOPIC_KEY = "b"


def send_signature_matches(ext_fields, access_key, topics, tuple signed, body, key):
    """Twin of :func:`trocket.codecs.acl.send_signature_matches`: the three fields read
    from the dict and the signature checked (:func:`signature_matches`'s compiled path)
    with no Python call between."""
    cdef PyObject* item
    cdef object signature
    cdef int r
    if type(ext_fields) is not dict or type(topics) is not set:
        return _py_send_signature_matches(ext_fields, access_key, topics, signed, body, key)
    item = PyDict_GetItemWithError(<dict>ext_fields, ACCESS_KEY_KEY)
    if (None if item is NULL else <object>item) != access_key:
        return False
    item = PyDict_GetItemWithError(<dict>ext_fields, SEND_TOPIC_KEY)
    if (None if item is NULL else <object>item) not in <set>topics:
        return False
    item = PyDict_GetItemWithError(<dict>ext_fields, SIGNATURE_KEY)
    signature = None if item is NULL else <object>item
    r = _signature_check(<dict>ext_fields, signed, body, key, signature)
    if r == -2:
        return _py_signature_matches(ext_fields, signed, body, key, signature) is True
    return r == 1


def provide(str name, value):
    """Take an object the twins use from a module above the wire part, handed down by
    that module when it is imported (:func:`trocket.codecs.accel.provide`), so this
    module imports none of them."""
    global _V1, _V2, _BN, _PQ, _ip_to_bytes, _header_wire, _fast_codes
    if name == "send_headers":
        _V1, _V2, _BN, _PQ = value
    elif name == "ip_to_bytes":
        _ip_to_bytes = value
    elif name == "header_wire":
        _header_wire, _fast_codes = value
    else:
        raise KeyError(name)
