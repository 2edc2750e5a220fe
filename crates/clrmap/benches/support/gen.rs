//! Deterministic generators of realistic signatures and dictionary maps, shared by the benches and
//! the `gen-gdmap` example. No RNG dependency: a xorshift is enough for a fixed, repeatable mix.
#![allow(dead_code, clippy::arithmetic_side_effects, clippy::indexing_slicing, clippy::unwrap_used)]

use clrmap::gdmap::DictionaryMapBuilder;
use clrmap::signature::{encode_type, ArrayShape, CallingConvention, MethodSignature, Primitive, Type};

/// xorshift64*.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const PRIMS: [Primitive; 8] = [Primitive::I4, Primitive::String, Primitive::Object, Primitive::Boolean, Primitive::I8, Primitive::Char, Primitive::U1, Primitive::R8];

fn prim(r: &mut Rng) -> Type {
    Type::primitive(PRIMS[r.below(PRIMS.len() as u64) as usize])
}

fn class(r: &mut Rng) -> Type {
    Type::Named { value_type: false, token: 0x0100_0000 | (1 + r.below(2000) as u32) }
}

fn simple(r: &mut Rng) -> Type {
    if r.below(2) == 0 {
        prim(r)
    } else {
        class(r)
    }
}

/// One type, drawn from a mix shaped like the TypeSpec/MethodSpec arguments of real framework
/// assemblies: mostly primitives and class references, then generic instantiations, arrays,
/// nested generics, a few multi-dimensional arrays and function pointers.
pub fn realistic_type(r: &mut Rng) -> Type {
    match r.below(100) {
        0..=34 => prim(r),
        35..=59 => class(r),
        60..=74 => {
            let n = 1 + r.below(2) as usize;
            Type::GenericInst { value_type: false, token: 0x0100_0000 | (1 + r.below(300) as u32), args: (0..n).map(|_| simple(r)).collect() }
        }
        75..=82 => Type::Named { value_type: true, token: 0x0200_0000 | (1 + r.below(4000) as u32) },
        83..=89 => Type::SzArray { element: Box::new(simple(r)) },
        90..=94 => {
            let inner = Type::GenericInst { value_type: false, token: 0x0100_0005, args: vec![prim(r)] };
            Type::GenericInst { value_type: false, token: 0x0100_0007, args: vec![Type::primitive(Primitive::String), inner] }
        }
        95..=97 => Type::Array { element: Box::new(prim(r)), shape: ArrayShape { rank: 2, sizes: vec![3, 4], lower_bounds: vec![0, 0] } },
        _ => Type::FnPtr {
            signature: Box::new(MethodSignature {
                calling_convention: CallingConvention(0),
                generic_parameter_count: 0,
                return_type: Type::primitive(Primitive::I4),
                parameters: vec![simple(r), prim(r)],
                sentinel: None,
            }),
        },
    }
}

/// `n` encoded signatures of the realistic mix.
pub fn signatures(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| {
            let mut b = Vec::new();
            encode_type(&realistic_type(&mut r), &mut b).unwrap();
            b
        })
        .collect()
}

/// A sorted map of `n` entries in which about 30% of entries share an earlier entry's item.
pub fn dictionary_map(n: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng::new(seed);
    let mut b = DictionaryMapBuilder::new();
    let mut rva = 0x1000u32;
    let mut instantiations: Vec<Vec<Type>> = Vec::new();
    for _ in 0..n {
        rva += 16 + 8 * r.below(16) as u32;
        let types = if !instantiations.is_empty() && r.below(100) < 30 {
            instantiations[r.below(instantiations.len() as u64) as usize].clone()
        } else {
            let t = match r.below(10) {
                0..=5 => 1,
                6..=8 => 2,
                _ => 3,
            };
            let v: Vec<Type> = (0..t).map(|_| realistic_type(&mut r)).collect();
            instantiations.push(v.clone());
            v
        };
        b.add(rva, &types).unwrap();
    }
    b.build().unwrap()
}
