//! FUNCTION libraries: loading one (its top-level code registers the
//! functions), finding a function, deleting and flushing them.
//!
//! Apart from the script cache and the call path because a library has a
//! life of its own (a name, its functions, FUNCTION LOAD's timeout) that
//! EVAL's scripts do not.

use super::errors::host_error_text;
use super::shebang::parse_library_shebang;
use super::{flags, now_ms, syntax, Engine, FunctionDef, Library};
use bytes::Bytes;
use mlua::{Function, Table, Value};
use std::sync::atomic::Ordering::Relaxed;

impl Engine {
    /// The name a library's `#!lua name=` header gives it.
    pub fn library_name(code: &[u8]) -> Result<String, String> {
        parse_library_shebang(code).map(|(name, _)| name)
    }

    /// FUNCTION LOAD: the library's name, or the error.
    pub fn load_library(&mut self, code: &Bytes, replace: bool) -> Result<String, String> {
        let (name, src) = parse_library_shebang(code)?;
        if self.libraries.contains_key(&name) && !replace {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let env: Table = self.api.raw_get("env").map_err(|e| e.to_string())?;
        let func = self
            .lua
            .load(&crate::textload::text_only(&src)[..])
            .set_name("@user_function")
            .set_environment(env)
            .into_function()
            .map_err(|e| format!("ERR Error compiling function: {}", syntax(&e)))?;
        let loader: Function = self.api.raw_get("load").map_err(|e| e.to_string())?;
        self.run.start_ms.store(now_ms(), Relaxed);
        self.run.loading.store(true, Relaxed);
        let loaded = loader.call(func);
        self.run.loading.store(false, Relaxed);
        let (ok, v): (bool, Value) = loaded.map_err(|e| host_error_text(&e))?;
        let Value::Table(t) = v else {
            return Err("ERR Error registering functions".into());
        };
        if !ok {
            let msg: String = t.raw_get("err").unwrap_or_default();
            return Err(format!("ERR Error registering functions: {msg}"));
        }
        let mut defs = Vec::new();
        for reg in t.sequence_values::<Table>() {
            let reg = reg.map_err(|e| e.to_string())?;
            let fname: String = reg.raw_get("name").map_err(|e| e.to_string())?;
            let f: Function = reg.raw_get("fn").map_err(|e| e.to_string())?;
            let fl: Vec<String> = reg.raw_get("flags").map_err(|e| e.to_string())?;
            let desc: Option<mlua::String> = reg.raw_get("desc").map_err(|e| e.to_string())?;
            let flags = fl
                .iter()
                .filter_map(|f| flags::parse(f))
                .fold(0, |a, b| a | b);
            if defs.iter().any(|d: &FunctionDef| d.name == fname) {
                return Err("ERR Function already exists in the library".into());
            }
            if let Some(old) = self.function(&fname) {
                if old.library != name {
                    return Err(format!("ERR Function {fname} already exists"));
                }
            }
            defs.push(FunctionDef {
                name: fname,
                library: name.clone(),
                description: desc.map(|d| Bytes::copy_from_slice(&d.as_bytes())),
                flags,
                func: self
                    .lua
                    .create_registry_value(f)
                    .map_err(|e| e.to_string())?,
            });
        }
        if defs.is_empty() {
            return Err("ERR No functions registered".into());
        }
        self.delete_library(&name);
        let lib = Library {
            name: name.clone(),
            code: code.clone(),
            functions: defs.iter().map(|d| d.name.clone()).collect(),
        };
        for d in defs {
            self.functions.insert(d.name.to_ascii_lowercase(), d);
        }
        self.libraries.insert(name.clone(), lib);
        Ok(name)
    }

    /// The function called `name`, in any case.
    pub fn function(&self, name: &str) -> Option<&FunctionDef> {
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            self.functions.get(&name.to_ascii_lowercase())
        } else {
            self.functions.get(name)
        }
    }

    /// Removes a library and its functions; false if there was none.
    pub fn delete_library(&mut self, name: &str) -> bool {
        let Some(lib) = self.libraries.remove(name) else {
            return false;
        };
        for f in &lib.functions {
            self.functions.remove(&f.to_ascii_lowercase());
        }
        self.lua.expire_registry_values();
        true
    }

    pub fn flush_functions(&mut self) {
        self.libraries.clear();
        self.functions.clear();
        self.lua.expire_registry_values();
    }
}
