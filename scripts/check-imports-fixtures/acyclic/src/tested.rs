//! Reaches `a` from its tests only.
pub struct T;

#[cfg(test)]
mod tests {
    use crate::a::A;

    fn _uses(_: A) {}
}
