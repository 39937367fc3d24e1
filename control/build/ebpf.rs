//! (to be implemented)

pub fn build() {}
