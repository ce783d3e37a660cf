"""Hypothesis strategies shared by the codec tests."""

from hypothesis import strategies as st

from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType

# Any text that is valid UTF-8 (no lone surrogates).
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
ext_maps = st.dictionaries(text.filter(lambda k: len(k.encode()) < 200), text, max_size=6)
i32 = st.integers(-(2**31), 2**31 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)


@st.composite
def commands(draw, serialize_type=None):
    stype = draw(st.sampled_from(SerializeType)) if serialize_type is None else serialize_type
    small = stype == SerializeType.ROCKETMQ
    return RemotingCommand(
        code=draw(i16 if small else i32),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(i16 if small else i32),
        opaque=draw(i32),
        flag=draw(i32),
        remark=draw(st.none() | text),
        ext_fields=draw(st.none() | ext_maps),
        body=draw(st.binary(max_size=64)),
        serialize_type=stype,
    )
