//! The CPU route's KV cache: f16 rows, one cache per layer.
//!
//! Owns: where the K/V row of a position lives. Sliding-window layers keep a ring of exactly
//! `window` rows (position `p` lives in slot `p % window`); full-attention layers grow one row
//! per position up to the context size.
//!
//! Invariant: after `append(p, ..)` for every `p < n`, `k_row(q)`/`v_row(q)` return the row of
//! position `q` for every `q` with `n - q <= window` (ring) or `q < n` (full).

use half::f16;

/// One layer's cache.
pub struct LayerCache {
    /// `[slots][kv_width]` keys.
    k: Vec<f16>,
    /// `[slots][v_width]` values.
    v: Vec<f16>,
    kvw: usize,
    vw: usize,
    /// Ring size for sliding layers; `None` for full layers.
    ring: Option<usize>,
}

impl LayerCache {
    pub fn new(kvw: usize, vw: usize, ring: Option<usize>) -> LayerCache {
        let (k, v) = match ring {
            Some(w) => (vec![f16::ZERO; w * kvw], vec![f16::ZERO; w * vw]),
            None => (Vec::new(), Vec::new()),
        };
        LayerCache {
            k,
            v,
            kvw,
            vw,
            ring,
        }
    }

    fn slot(&self, pos: usize) -> usize {
        match self.ring {
            Some(w) => pos % w,
            None => pos,
        }
    }

    /// Store the rows of position `pos` (positions must be appended in order).
    pub fn append(&mut self, pos: usize, k: &[f16], v: &[f16]) {
        match self.ring {
            Some(_) => {
                let s = self.slot(pos);
                self.k[s * self.kvw..(s + 1) * self.kvw].copy_from_slice(k);
                self.v[s * self.vw..(s + 1) * self.vw].copy_from_slice(v);
            }
            None => {
                debug_assert_eq!(self.k.len(), pos * self.kvw);
                self.k.extend_from_slice(k);
                self.v.extend_from_slice(v);
            }
        }
    }

    /// Key row of position `pos`.
    pub fn k_row(&self, pos: usize) -> &[f16] {
        let s = self.slot(pos);
        &self.k[s * self.kvw..(s + 1) * self.kvw]
    }

    /// Value row of position `pos`.
    pub fn v_row(&self, pos: usize) -> &[f16] {
        let s = self.slot(pos);
        &self.v[s * self.vw..(s + 1) * self.vw]
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        if self.ring.is_none() {
            self.k.clear();
            self.v.clear();
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.k.capacity() + self.v.capacity()) * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_last_window_rows() {
        let mut c = LayerCache::new(1, 1, Some(3));
        for p in 0..10 {
            let x = [f16::from_f32(p as f32)];
            c.append(p, &x, &x);
        }
        for p in 7..10 {
            assert_eq!(c.k_row(p)[0].to_f32(), p as f32);
            assert_eq!(c.v_row(p)[0].to_f32(), p as f32);
        }
    }

    #[test]
    fn full_cache_grows() {
        let mut c = LayerCache::new(2, 2, None);
        for p in 0..5 {
            let x = [f16::from_f32(p as f32); 2];
            c.append(p, &x, &x);
        }
        assert_eq!(c.k_row(0)[1].to_f32(), 0.0);
        assert_eq!(c.k_row(4)[0].to_f32(), 4.0);
    }
}
