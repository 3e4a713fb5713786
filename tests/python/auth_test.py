"""The token-file rule the Python client shares with the server and the C++ client
(util/auth_token.h, tests/util/auth_token_test.cc): first line, surrounding whitespace dropped,
visible ASCII only, every refusal naming the file and the reason."""

import os
import tempfile
import unittest

from looptool import auth


class AuthTokenTest(unittest.TestCase):
    def test_first_line_with_its_surrounding_whitespace_dropped(self):
        self.assertEqual(auth.parse_auth_token("s3cret"), "s3cret")
        self.assertEqual(auth.parse_auth_token("s3cret\n"), "s3cret")
        self.assertEqual(auth.parse_auth_token("s3cret\r\n"), "s3cret")
        self.assertEqual(auth.parse_auth_token("  \ts3cret \t\r\nsecond line\n"), "s3cret")

    def test_refuses_empty_and_invisible_characters(self):
        for text, message in (("", "its first line holds no token"),
                              (" \r\n", "its first line holds no token"),
                              ("\nsecret", "its first line holds no token"),
                              ("sec ret", "its token holds the character 0x20; a token is visible "
                                          "ASCII (0x21-0x7e) only"),
                              ("sec\tret", "its token holds the character 0x09; a token is "
                                           "visible ASCII (0x21-0x7e) only")):
            with self.assertRaises(ValueError) as e:
                auth.parse_auth_token(text)
            self.assertEqual(str(e.exception), message, repr(text))

    def test_files_are_named_in_errors(self):
        with tempfile.TemporaryDirectory() as d:
            good, bad = os.path.join(d, "good"), os.path.join(d, "bad")
            with open(good, "w") as f:
                f.write("tok3n\r\n")
            with open(bad, "w") as f:
                f.write("\n")
            self.assertEqual(auth.read_auth_token_file(good), "tok3n")
            with self.assertRaises(ValueError) as e:
                auth.read_auth_token_file(bad)
            self.assertEqual(str(e.exception),
                             f"the token file {bad} is unusable: its first line holds no token")
            with self.assertRaises(ValueError) as e:
                auth.read_auth_token_file(os.path.join(d, "none"))
            self.assertIn(f"cannot read the token file {d}/none", str(e.exception))


if __name__ == "__main__":
    unittest.main()
