//! Bit fields as the class headers write them: `hi:lo` inside one 32-bit method data
//! word or GPFIFO entry half ([`Field`]), and `MW(hi:lo)` across a multi-word structure
//! such as a QMD, counted from bit 0 of word 0 ([`MwField`]). The generated modules
//! under `class` hold one constant of these types per `#define`; the encoders in
//! `method`, `gpfifo` and `qmd` write values through them.

/// Bits `hi..=lo` of one 32-bit word (`#define NAME hi:lo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Field {
    /// Its highest bit, below 32.
    pub hi: u32,
    /// Its lowest bit.
    pub lo: u32,
}

impl Field {
    /// Bits `hi..=lo`; the generator checks `lo <= hi < 32` for every header field.
    #[inline]
    pub const fn new(hi: u32, lo: u32) -> Self {
        Self { hi, lo }
    }

    /// Its width in bits.
    #[inline]
    pub const fn bits(self) -> u32 {
        self.hi - self.lo + 1
    }

    /// The largest value it holds.
    #[inline]
    pub const fn max(self) -> u32 {
        u32::MAX >> (32 - self.bits())
    }

    /// `value` in place, or `None` when it is wider than the field.
    #[inline]
    pub const fn encode(self, value: u32) -> Option<u32> {
        if value > self.max() {
            None
        } else {
            Some(value << self.lo)
        }
    }

    /// `value` in place, for a header's own value of this field (`_EN`, `_PITCH`, …):
    /// one that does not fit is a bug, refused at compile time where the call is in a
    /// constant.
    #[inline]
    pub const fn of(self, value: u32) -> u32 {
        match self.encode(value) {
            Some(w) => w,
            None => panic!("a header value wider than its field"),
        }
    }

    /// `value` in place, cut to the field's width (for values masked by the caller,
    /// such as an address's bits 56:32 into a 25-bit `_UPPER` field).
    #[inline]
    pub fn encode_masked(self, value: u64) -> u32 {
        let masked = u32::try_from(value & u64::from(self.max())).expect("masked to 32 bits");
        masked << self.lo
    }

    /// The field's value in `word`.
    #[inline]
    pub const fn decode(self, word: u32) -> u32 {
        (word >> self.lo) & self.max()
    }
}

/// Bits `hi..=lo` of a multi-word structure (`#define NAME MW(hi:lo)`), named as the
/// header names it for error messages (without its `NVxxxx_QMDVnn_nn_` prefix; an
/// indexed field carries its index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MwField {
    /// The header's name, without the structure's prefix.
    pub name: &'static str,
    /// The index of an indexed field (`RELEASE_ENABLE(i)`, …).
    pub index: Option<u32>,
    /// The second index of a field of two (`SUB_TASK_…(i,j)`).
    pub sub_index: Option<u32>,
    /// Its highest bit.
    pub hi: u32,
    /// Its lowest bit.
    pub lo: u32,
}

/// A value wider than its field, or a field past the end of the words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:#x} does not fit {name} (bits {hi}:{lo} of {words} words)")]
pub struct FieldError {
    /// The field's name in the header.
    pub name: &'static str,
    /// The value.
    pub value: u64,
    /// Its highest bit.
    pub hi: u32,
    /// Its lowest bit.
    pub lo: u32,
    /// The structure's length in words.
    pub words: usize,
}

impl MwField {
    /// A field of no index.
    #[inline]
    pub const fn new(name: &'static str, hi: u32, lo: u32) -> Self {
        Self {
            name,
            index: None,
            sub_index: None,
            hi,
            lo,
        }
    }

    /// Element `index` of an indexed field.
    #[inline]
    pub const fn indexed(name: &'static str, index: u32, hi: u32, lo: u32) -> Self {
        Self {
            name,
            index: Some(index),
            sub_index: None,
            hi,
            lo,
        }
    }

    /// Element `(index, sub_index)` of a field of two indices.
    #[inline]
    pub const fn indexed2(
        name: &'static str,
        index: u32,
        sub_index: u32,
        hi: u32,
        lo: u32,
    ) -> Self {
        Self {
            name,
            index: Some(index),
            sub_index: Some(sub_index),
            hi,
            lo,
        }
    }

    /// Its width in bits.
    #[inline]
    pub const fn bits(self) -> u32 {
        self.hi - self.lo + 1
    }

    /// Writes `value` into `words`.
    ///
    /// # Errors
    /// [`FieldError`] for a value wider than the field or a field past the words' end;
    /// `words` is left as it was.
    #[inline]
    pub fn set(self, words: &mut [u32], value: u64) -> Result<(), FieldError> {
        let bits = self.bits();
        let err = || FieldError {
            name: self.name,
            value,
            hi: self.hi,
            lo: self.lo,
            words: words.len(),
        };
        if bits < 64 && value >> bits != 0 {
            return Err(err());
        }
        if usize::try_from(self.hi / 32).map_or(true, |w| w >= words.len()) {
            return Err(err());
        }
        // A word at a time: a field spans at most three of them.
        let mut done = 0;
        while done < bits {
            let at = self.lo + done;
            let (shift, n) = (at % 32, (32 - at % 32).min(bits - done));
            let mask = (u32::MAX >> (32 - n)) << shift;
            #[expect(clippy::cast_possible_truncation, reason = "the word's part only")]
            let part = ((value >> done) as u32) << shift;
            // PANIC: `at <= hi`, whose word was checked above to lie within `words`.
            let word = &mut words[(at / 32) as usize];
            *word = (*word & !mask) | (part & mask);
            done += n;
        }
        Ok(())
    }

    /// The field's value in `words`, `None` when it lies past their end.
    #[inline]
    pub fn get(self, words: &[u32]) -> Option<u64> {
        let (bits, mut done, mut v) = (self.bits(), 0, 0u64);
        while done < bits {
            let at = self.lo + done;
            let (shift, n) = (at % 32, (32 - at % 32).min(bits - done));
            let word = words.get(usize::try_from(at / 32).ok()?)?;
            v |= (u64::from(word >> shift) & (u64::MAX >> (64 - n))) << done;
            done += n;
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_encodes_at_its_position_and_refuses_a_wider_value() {
        let f = Field::new(30, 10);
        assert_eq!(f.bits(), 21);
        assert_eq!(f.encode(0x1f_ffff), Some(0x1f_ffff << 10));
        assert_eq!(f.encode(0x20_0000), None);
        assert_eq!(f.decode(0x7fff_fc00), 0x1f_ffff);
    }

    #[test]
    fn whole_word_field_holds_every_value() {
        let f = Field::new(31, 0);
        assert_eq!(f.max(), u32::MAX);
        assert_eq!(f.encode(u32::MAX), Some(u32::MAX));
        assert_eq!(f.encode_masked(0x1_2345_6789), 0x2345_6789);
    }

    #[test]
    fn mw_field_spanning_two_words_round_trips() {
        let f = MwField::new("X", 40, 24);
        let mut w = [0u32; 2];
        f.set(&mut w, 0x1_ffff).expect("fits");
        assert_eq!(w, [0xff00_0000, 0x1ff]);
        assert_eq!(f.get(&w), Some(0x1_ffff));
        f.set(&mut w, 0).expect("fits");
        assert_eq!(w, [0, 0]);
    }

    #[test]
    fn mw_field_sets_and_gets_as_bit_by_bit_would_at_every_position_and_width() {
        // The reference: one bit at a time, what the word-wise code must equal.
        fn set_bits(f: MwField, w: &mut [u32], v: u64) {
            for bit in 0..f.bits() {
                let at = f.lo + bit;
                let mask = 1u32 << (at % 32);
                if v >> bit & 1 == 1 {
                    w[(at / 32) as usize] |= mask;
                } else {
                    w[(at / 32) as usize] &= !mask;
                }
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for lo in 0..100 {
            for bits in 1..=64 {
                let f = MwField::new("X", lo + bits - 1, lo);
                let v = if bits == 64 {
                    next()
                } else {
                    next() & ((1 << bits) - 1)
                };
                let background: [u32; 6] =
                    std::array::from_fn(|_| u32::try_from(next() >> 32).expect("32 bits"));
                let (mut got, mut want) = (background, background);
                f.set(&mut got, v).expect("fits");
                set_bits(f, &mut want, v);
                assert_eq!(got, want, "bits {}:{lo} = {v:#x}", lo + bits - 1);
                assert_eq!(f.get(&got), Some(v));
            }
        }
    }

    #[test]
    fn mw_field_refuses_a_wide_value_or_a_field_past_the_words() {
        let mut w = [0u32; 2];
        MwField::new("X", 3, 0)
            .set(&mut w, 16)
            .expect_err("16 is 5 bits");
        MwField::new("X", 64, 64)
            .set(&mut w, 1)
            .expect_err("bit 64 is past two words");
        assert_eq!(w, [0, 0]);
        assert_eq!(MwField::new("X", 64, 64).get(&w), None);
    }
}
