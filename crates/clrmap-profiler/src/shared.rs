//! The class of code shared by its class (docs/names.md#shared-code) where the runtime does not
//! tell it.
//!
//! GetFunctionInfo2 without a frame names the class of a body only when it can find an exact one.
//! For code shared over `System.__Canon` by its class (`Box<__Canon>.Make`), .NET 10 answers the
//! body's own class, the canonical instantiation; .NET 8 and 9 answer 0. The profiler then finds
//! that class among the classes the runtime has loaded (ClassLoadFinished, with
//! COR_PRF_MONITOR_CLASS_LOADS): a canonical instantiation of the body's owner TypeDef (each type
//! argument `System.__Canon` or a value type whose own arguments are canonical, at least one
//! `System.__Canon` somewhere), for which GetFunctionFromTokenAndTypeArgs gives back the body's
//! own FunctionID. Distinct canonical instantiations own distinct bodies, so at most one answers;
//! when none does (the class was loaded before an attach, or the call is refused) the class
//! stays unknown, as before.
//!
//! The load callbacks only append the ClassID to a log under a lock of its own, never held
//! across a call into the runtime; the log is read when a body needs its class.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::com::Info;

/// Nesting limit for a type argument's own type arguments.
const MAX_DEPTH: u32 = 16;

/// Classes loaded (`true`) and unloaded (`false`) since the log was last read, in order.
static LOG: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());

/// ClassLoadFinished: a class the runtime loaded.
pub fn loaded(class: usize) {
    if let Ok(mut log) = LOG.lock() {
        log.push((class, true));
    }
}

/// ClassUnloadStarted: its ClassID may be reused.
pub fn unloaded(class: usize) {
    if let Ok(mut log) = LOG.lock() {
        log.push((class, false));
    }
}

/// What the profiler knows of the loaded classes.
#[derive(Default)]
pub struct Shared {
    /// Whether class loads are monitored (a capture at start-up): without the log there is
    /// nothing to search.
    pub enabled: bool,
    /// (ModuleID, TypeDef) → the loaded canonical instantiations of that TypeDef that hold
    /// `System.__Canon`.
    canonical: HashMap<(usize, u32), Vec<usize>>,
    /// ClassID → how it may stand as a type argument of a canonical instantiation
    /// ([`Shared::arg_shape`]).
    shapes: HashMap<usize, Option<bool>>,
    /// ModuleID → whether it is System.Private.CoreLib.
    corelib: HashMap<usize, bool>,
    /// CoreLib's TypeDef → its name.
    names: HashMap<u32, Option<String>>,
}

impl Shared {
    /// Forget everything (a new recording), and the log too.
    pub fn reset(&mut self) {
        *self = Shared::default();
        if let Ok(mut log) = LOG.lock() {
            log.clear();
        }
    }

    /// The class of body `fid`, shared by its class, whose method type arguments are
    /// `method_args` (as GetFunctionInfo2 gave them): its canonical instantiation, proven by
    /// the runtime giving back `fid` for it. `None` if no loaded class does.
    pub fn class_of(&mut self, info: Info, fid: usize, method_args: &[usize]) -> Option<usize> {
        if !self.enabled {
            return None;
        }
        let (module, method_def) = info.function_ids(fid)?;
        let owner = info.method_owner(module, method_def)?;
        self.read_log(info);
        let candidates = self.canonical.get(&(module, owner))?.clone();
        candidates.into_iter().find(|&class| info.function_from_token_and_type_args(module, method_def, class, method_args) == Some(fid))
    }

    /// Take the classes loaded since the last call into the index.
    fn read_log(&mut self, info: Info) {
        let events = match LOG.lock() {
            Ok(mut log) => std::mem::take(&mut *log),
            Err(_) => return,
        };
        for (class, is_loaded) in events {
            if !is_loaded {
                self.shapes.remove(&class);
                for v in self.canonical.values_mut() {
                    v.retain(|&c| c != class);
                }
                continue;
            }
            let Some((module, token, args)) = info.class_info(class) else { continue };
            if args.is_empty() {
                continue;
            }
            let mut shared = false;
            let mut canonical = true;
            for a in args {
                match self.arg_shape(info, a, 1) {
                    Some(has_canon) => shared |= has_canon,
                    None => {
                        canonical = false;
                        break;
                    }
                }
            }
            if canonical && shared {
                let v = self.canonical.entry((module, token)).or_default();
                if !v.contains(&class) {
                    v.push(class);
                }
            }
        }
    }

    /// How class `class` may stand as a type argument of a canonical instantiation:
    /// `Some(true)` for `System.__Canon` or a value type holding it, `Some(false)` for a value
    /// type without it, `None` for any other reference type (the canonical form replaces it by
    /// `System.__Canon`) or a class the runtime cannot describe.
    fn arg_shape(&mut self, info: Info, class: usize, depth: u32) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        if let Some(shape) = self.shapes.get(&class) {
            return *shape;
        }
        let shape = self.describe_shape(info, class, depth);
        self.shapes.insert(class, shape);
        shape
    }

    fn describe_shape(&mut self, info: Info, class: usize, depth: u32) -> Option<bool> {
        if info.array_class(class).is_some() {
            return None;
        }
        let (module, token, args, parent) = info.class_info_and_parent(class)?;
        match self.corelib_name(info, module, token).as_deref() {
            Some("System.__Canon") => return Some(true),
            // Enum itself is a class, though its parent is ValueType.
            Some("System.Enum") => return None,
            _ => {}
        }
        // A value type's parent is System.ValueType (System.Enum for an enum); an interface
        // and System.Object have none.
        if parent == 0 {
            return None;
        }
        let (parent_module, parent_token, _, _) = info.class_info_and_parent(parent)?;
        if !matches!(self.corelib_name(info, parent_module, parent_token).as_deref(), Some("System.ValueType" | "System.Enum")) {
            return None;
        }
        let mut has_canon = false;
        for a in args {
            has_canon |= self.arg_shape(info, a, depth.saturating_add(1))?;
        }
        Some(has_canon)
    }

    /// A TypeDef's name if its module is System.Private.CoreLib (`None` for any other module).
    fn corelib_name(&mut self, info: Info, module: usize, token: u32) -> Option<String> {
        let is_corelib = *self.corelib.entry(module).or_insert_with(|| info.module_info(module).is_some_and(|(path, _)| path.ends_with("/System.Private.CoreLib.dll")));
        if !is_corelib {
            return None;
        }
        self.names.entry(token).or_insert_with(|| info.type_def_name(module, token)).clone()
    }
}
