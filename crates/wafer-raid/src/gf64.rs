//! Arithmetic in GF(2^64), the field of the stamp code's second parity.
//!
//! An element is a polynomial over GF(2) of degree below 64, bit `i` holding
//! the coefficient of `x^i`. Addition is XOR; a product is the carry-less
//! product reduced modulo `x^64 + x^4 + x^3 + x + 1`. That polynomial is
//! primitive (a test below proves that `x` has order `2^64 - 1`), so the
//! quotient ring is a field: every non-zero element has an inverse, and the
//! powers `x^0, x^1, ..., x^(2^64 - 2)` are distinct and non-zero.
//!
//! Everything is portable integer code. A product is a 64×64→128-bit
//! carry-less multiply by 4-bit windows, then two folds of the high half using
//! `x^64 = x^4 + x^3 + x + 1`. Multiplying by a power of `x` is a shift and a
//! fold, and the inverse is `a^(2^64 - 2)` by square-and-multiply: slow next to
//! a product, but needed only to solve for two lost data disks.

/// The multiplicative identity.
pub const ONE: u64 = 1;

/// The product `a · b`.
pub fn mul(a: u64, b: u64) -> u64 {
    reduce(carry_less_mul(a, b))
}

/// The product `a · x^n`, a shift and a fold per 63 powers of `x`.
pub fn mul_x_pow(a: u64, n: usize) -> u64 {
    let (mut value, mut remaining) = (a, n);
    while remaining > 0 {
        let step = remaining.min(63);
        value = reduce(u128::from(value) << step);
        remaining -= step;
    }
    value
}

/// `a` to the power `exponent`, by square-and-multiply.
pub fn pow(a: u64, exponent: u64) -> u64 {
    let (mut result, mut square, mut exponent) = (ONE, a, exponent);
    while exponent > 0 {
        if exponent & 1 == 1 {
            result = mul(result, square);
        }
        square = mul(square, square);
        exponent >>= 1;
    }
    result
}

/// The inverse of `a`: `a^(2^64 - 2)`, since `a^(2^64 - 1) = 1`.
///
/// # Panics
/// If `a` is zero, which has no inverse.
pub fn inv(a: u64) -> u64 {
    assert_ne!(a, 0, "zero has no inverse in GF(2^64)");
    pow(a, u64::MAX - 1)
}

/// The quotient `a / b`.
///
/// # Panics
/// If `b` is zero.
pub fn div(a: u64, b: u64) -> u64 {
    mul(a, inv(b))
}

/// The unreduced carry-less product, degree at most 126.
fn carry_less_mul(a: u64, b: u64) -> u128 {
    // multiples[i] is a times the 4-bit polynomial i.
    let a = u128::from(a);
    let mut multiples = [0u128; 16];
    for i in 1..multiples.len() {
        let odd = if i % 2 == 1 { a } else { 0 };
        multiples[i] = (multiples[i / 2] << 1) ^ odd;
    }
    (0..16).rev().fold(0, |product, window| {
        let nibble = (b >> (4 * window)) & 0xf;
        (product << 4) ^ multiples[nibble as usize]
    })
}

/// Reduces a polynomial of degree at most 126 below `x^64`.
fn reduce(product: u128) -> u64 {
    // The first fold leaves degree at most 66, the second below 64.
    let reduced = fold(fold(product));
    debug_assert_eq!(reduced >> 64, 0, "two folds reduce below x^64");
    reduced as u64
}

/// Replaces `high · x^64` by `high · (x^4 + x^3 + x + 1)`, the reduction
/// polynomial's tail.
fn fold(value: u128) -> u128 {
    let high = value >> 64;
    let low = value & u128::from(u64::MAX);
    low ^ high ^ (high << 1) ^ (high << 3) ^ (high << 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer_rng::Rng;

    /// The element `x`, which generates the multiplicative group.
    const X: u64 = 2;

    /// Textbook shift-and-add multiply, one bit of `b` at a time.
    fn reference_mul(mut a: u64, mut b: u64) -> u64 {
        let mut product = 0;
        while b != 0 {
            if b & 1 == 1 {
                product ^= a;
            }
            let carry = a >> 63 == 1;
            a <<= 1;
            if carry {
                a ^= 0x1b;
            }
            b >>= 1;
        }
        product
    }

    fn random_triples(seed: u64) -> impl Iterator<Item = (u64, u64, u64)> {
        let mut rng = Rng::seeded(seed);
        (0..2000).map(move |_| (rng.next_u64(), rng.next_u64(), rng.next_u64()))
    }

    #[test]
    fn mul_matches_shift_and_add() {
        let edges = [0, 1, 2, 0x1b, 1 << 63, u64::MAX];
        for &a in &edges {
            for &b in &edges {
                assert_eq!(mul(a, b), reference_mul(a, b), "{a:#x} * {b:#x}");
            }
        }
        for (a, b, _) in random_triples(0x6f64_0001) {
            assert_eq!(mul(a, b), reference_mul(a, b), "{a:#x} * {b:#x}");
        }
    }

    #[test]
    fn mul_is_commutative_associative_and_distributes_over_xor() {
        for (a, b, c) in random_triples(0x6f64_0002) {
            assert_eq!(mul(a, b), mul(b, a));
            assert_eq!(mul(mul(a, b), c), mul(a, mul(b, c)), "{a:#x} {b:#x} {c:#x}");
            assert_eq!(mul(a, b ^ c), mul(a, b) ^ mul(a, c), "{a:#x} {b:#x} {c:#x}");
            assert_eq!(mul(a, ONE), a);
            assert_eq!(mul(a, 0), 0);
        }
    }

    #[test]
    fn every_non_zero_element_has_an_inverse() {
        for a in [1, X, 0x1b, 1 << 63, u64::MAX] {
            assert_eq!(mul(a, inv(a)), ONE, "{a:#x}");
        }
        for (a, b, _) in random_triples(0x6f64_0003) {
            let a = a.max(1);
            assert_eq!(mul(a, inv(a)), ONE, "{a:#x}");
            assert_eq!(mul(div(b, a), a), b, "{b:#x} / {a:#x}");
        }
    }

    #[test]
    #[should_panic(expected = "zero has no inverse")]
    fn zero_has_no_inverse() {
        inv(0);
    }

    #[test]
    fn mul_x_pow_is_repeated_multiplication_by_x() {
        for (a, _, _) in random_triples(0x6f64_0004).take(50) {
            let mut expected = a;
            for n in 0..=200 {
                assert_eq!(mul_x_pow(a, n), expected, "{a:#x} * x^{n}");
                expected = mul(expected, X);
            }
        }
    }

    /// `x^(2^64 - 1) = 1` and `x^((2^64 - 1) / p) != 1` for every prime `p`
    /// dividing `2^64 - 1`: `x` has order `2^64 - 1`, so the polynomial is
    /// primitive (and in particular irreducible, since a reducible modulus has
    /// fewer than `2^64 - 1` units).
    #[test]
    fn x_generates_the_multiplicative_group() {
        const ORDER: u64 = u64::MAX;
        const PRIME_FACTORS: [u64; 7] = [3, 5, 17, 257, 641, 65_537, 6_700_417];
        assert_eq!(PRIME_FACTORS.iter().product::<u64>(), ORDER);
        assert_eq!(pow(X, ORDER), ONE);
        for p in PRIME_FACTORS {
            assert_ne!(pow(X, ORDER / p), ONE, "x^((2^64 - 1) / {p})");
        }
    }
}
