//! stub
use crate::{server::Res, Bench};
pub fn run(_b: &mut Bench) -> Res<()> {
    Ok(())
}
