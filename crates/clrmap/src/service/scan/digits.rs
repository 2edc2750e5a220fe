//! The common frame's integers (a module index, a token, an IL offset), read with no overflow
//! check per digit.

/// The most digits [`short_integer`] reads: any number of them is below `u64::MAX`.
pub(super) const SHORT_DIGITS: usize = 19;

/// A JSON integer of 1 to [`SHORT_DIGITS`] digits at the start of `bytes` (no sign, no leading
/// zero before a digit) and its length; `None` for anything else, which the cursor's general
/// reader reads. Short enough that no digit needs an overflow check. A byte at a time: the common
/// frame's numbers are short but for the token, and eight digits read at once (multiplied
/// together in a word) measured no faster.
#[inline(always)]
pub(super) fn short_integer(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut n = 0u64;
    let mut len = 0usize;
    for &b in bytes.iter().take(SHORT_DIGITS.saturating_add(1)) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        // At most 20 digits, and a count of more than 19 is refused: nothing kept wraps.
        n = n.wrapping_mul(10).wrapping_add(u64::from(d));
        len = len.wrapping_add(1);
    }
    let leading_zero = len > 1 && bytes.first() == Some(&b'0');
    (len > 0 && len <= SHORT_DIGITS && !leading_zero).then_some((n, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader against the standard library's, on digits of every count followed by each
    /// kind of byte (and by nothing), at every length of what follows.
    #[test]
    fn digits_are_read_as_the_standard_library_reads_them() {
        let mut seed = 0x853c_49e6_748f_ea9bu64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let after: &[&[u8]] = &[b"", b",", b"}", b" ", b"/", b":", b".", b"e", b"\xC3\xA9", b"\xFF", b"\x00", b"abcdefgh0123456789"];
        for len in 1..=21usize {
            for _ in 0..300 {
                let mut text: Vec<u8> = (0..len).map(|_| b'0' + u8::try_from(next() % 10).unwrap()).collect();
                if next() % 4 == 0 {
                    text[0] = b'1';
                }
                let digits = String::from_utf8(text.clone()).unwrap();
                let want = (len <= SHORT_DIGITS && (len == 1 || !digits.starts_with('0'))).then(|| (digits.parse::<u64>().unwrap(), len));
                for tail in after {
                    for pad in 0..18 {
                        let mut body = text.clone();
                        body.extend_from_slice(tail);
                        body.extend(std::iter::repeat_n(b'x', pad));
                        assert_eq!(short_integer(&body), want, "{:?}", String::from_utf8_lossy(&body));
                    }
                }
            }
        }
        for none in [&b""[..], b"-1", b"x1", b" 1", b"\xC3\xA9"] {
            assert_eq!(short_integer(none), None);
        }
    }
}
