"""The shared-token file a LoopTool server requires and its clients send, read by the rule the
server and the C++ client use (util/auth_token.h): the first line, with the whitespace around it
(spaces, tabs, a CR of CRLF) dropped, must be a non-empty run of visible ASCII (0x21-0x7e).
"""


def parse_auth_token(text: str) -> str:
    """The token of a token file's text. ValueError saying what is wrong otherwise."""
    line = text.split("\n", 1)[0].strip(" \t\r\n\v\f")
    if not line:
        raise ValueError("its first line holds no token")
    for c in line:
        if not 0x21 <= ord(c) <= 0x7E:
            raise ValueError(f"its token holds the character 0x{ord(c):02x}; a token is visible "
                             f"ASCII (0x21-0x7e) only")
    return line


def read_auth_token_file(path: str) -> str:
    """The token in the file at `path`. ValueError naming the file when it cannot be read or holds
    no usable token."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("latin-1")
    except OSError as e:
        raise ValueError(f"cannot read the token file {path}: {e.strerror}") from None
    try:
        return parse_auth_token(text)
    except ValueError as e:
        raise ValueError(f"the token file {path} is unusable: {e}") from None
