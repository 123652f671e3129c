//! Binding values cross between QuickJS and the host without JSON text: the host reads a call's
//! arguments straight out of the interpreter's heap and builds each reply there, with the rules
//! of the bootstrap's lossless encoder (`sdk-templates/lossless_json.js`) and of `JSON.parse`.
//!
//! Reading never runs program code. Whatever plain data cannot be read without running it (a
//! getter, a proxy) or is not plain data (a class instance, an array hole, an integer the
//! encoder prints rounded) is left to the bootstrap's encoder, which gives the verdict it
//! always gave.

use std::ffi::c_char;

use rquickjs::{Array, Ctx, Object, qjs};
use serde_json::{Map, Number, Value};

use dsh_tool_code_mode::code_runtime::frame::MAX_DEPTH;

/// What the host made of a program's value.
pub(crate) enum Read {
    /// Plain data, read in full.
    Data(Value),
    /// Not lossless JSON: `-0`, `NaN`, a lone surrogate, `undefined`, a symbol, a BigInt, a
    /// function, or deeper than [`MAX_DEPTH`]. The encoder would refuse it at the same point,
    /// having run nothing before.
    Unfit,
    /// Reading on would run program code or needs the encoder's own judgement: the bootstrap
    /// encodes the value instead.
    Encode,
}

/// The longest JSON text of a number: `-1.2345678901234567e-308`.
const NUMBER_BYTES: u64 = 24;

/// Largest integer whose JSON text (`JSON.stringify`) is its exact digits.
const EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// The intrinsics a plain value is recognised by, taken before the program runs. The
/// prototypes are kept by address only: the context holds them for as long as it can call the
/// reader, and the collector cannot see references a host function's closure holds.
pub(crate) struct Reader {
    object_proto: usize,
    array_proto: usize,
    object_class: u32,
    array_class: u32,
    max_bytes: u64,
}

/// An object or array being read: the interpreter's value and the host value so far.
enum OpenRead<'js> {
    Array {
        array: rquickjs::Value<'js>,
        len: u32,
        next: u32,
        items: Vec<Value>,
    },
    Object {
        object: rquickjs::Value<'js>,
        keys: Keys<'js>,
        next: u32,
        map: Map<String, Value>,
        key: String,
    },
}

/// A value's own enumerable string keys, as `Object.keys` lists them.
struct Keys<'js> {
    ctx: Ctx<'js>,
    tab: *mut qjs::JSPropertyEnum,
    len: u32,
}

impl<'js> Keys<'js> {
    /// `None` when the interpreter could not list them (out of memory).
    fn of(ctx: &Ctx<'js>, object: &rquickjs::Value<'js>) -> Option<Self> {
        let mut tab = std::ptr::null_mut();
        let mut len = 0;
        let flags = (qjs::JS_GPN_STRING_MASK | qjs::JS_GPN_ENUM_ONLY) as i32;
        // SAFETY: `object` is a live value of this context; on success QuickJS hands over a
        // table of `len` atoms, freed in `drop`.
        let status = unsafe {
            qjs::JS_GetOwnPropertyNames(raw(ctx), &mut tab, &mut len, object.as_raw(), flags)
        };
        (status >= 0).then(|| Keys {
            ctx: ctx.clone(),
            tab,
            len,
        })
    }

    fn atom(&self, index: u32) -> qjs::JSAtom {
        debug_assert!(index < self.len);
        // SAFETY: `index` is within the table QuickJS returned.
        unsafe { (*self.tab.add(index as usize)).atom }
    }
}

impl Drop for Keys<'_> {
    fn drop(&mut self) {
        // SAFETY: the table and its atoms came from `JS_GetOwnPropertyNames` and are freed once.
        unsafe { qjs::JS_FreePropertyEnum(raw(&self.ctx), self.tab, self.len) };
    }
}

fn raw(ctx: &Ctx<'_>) -> *mut qjs::JSContext {
    ctx.as_raw().as_ptr()
}

/// What one own property holds, read without running a getter.
enum Own<'js> {
    Data(rquickjs::Value<'js>),
    /// An accessor, a missing property (a hole), or a failure to read: the encoder's case.
    Other,
}

fn own_property<'js>(ctx: &Ctx<'js>, object: &rquickjs::Value<'js>, atom: qjs::JSAtom) -> Own<'js> {
    let mut desc = qjs::JSPropertyDescriptor {
        flags: 0,
        value: qjs::JS_UNDEFINED,
        getter: qjs::JS_UNDEFINED,
        setter: qjs::JS_UNDEFINED,
    };
    // SAFETY: `object` is a live ordinary object or array of this context (never a proxy), for
    // which QuickJS reads the property without calling into JavaScript. On success the three
    // values are owned by us: each is either freed or wrapped once.
    unsafe {
        let found = qjs::JS_GetOwnProperty(raw(ctx), &mut desc, object.as_raw(), atom);
        if found < 0 {
            drop(ctx.catch());
            return Own::Other;
        }
        if found == 0 {
            return Own::Other;
        }
        let value = rquickjs::Value::from_raw(ctx.clone(), desc.value);
        drop(rquickjs::Value::from_raw(ctx.clone(), desc.getter));
        drop(rquickjs::Value::from_raw(ctx.clone(), desc.setter));
        if desc.flags & qjs::JS_PROP_GETSET as i32 != 0 {
            return Own::Other;
        }
        Own::Data(value)
    }
}

/// What visiting one value gave.
enum Visit<'js> {
    Leaf(Value),
    Open(OpenRead<'js>),
    Unfit,
    Encode,
}

/// The address identifying an object.
fn address(object: &Object<'_>) -> usize {
    // SAFETY: reading the pointer of an object value; it is never dereferenced.
    unsafe { qjs::JS_VALUE_GET_PTR(object.as_raw()) as usize }
}

impl Reader {
    /// Takes the intrinsic prototypes and classes; `max_bytes` is the cap on the arguments'
    /// JSON text, which the encoder checks exactly when the host's bound exceeds it.
    pub(crate) fn new(ctx: &Ctx<'_>, max_bytes: u64) -> rquickjs::Result<Self> {
        let object = Object::new(ctx.clone())?;
        let array = Array::new(ctx.clone())?;
        let (Some(object_proto), Some(array_proto)) =
            (object.get_prototype(), array.get_prototype())
        else {
            return Err(rquickjs::Error::Unknown);
        };
        // SAFETY: both are live objects of this context.
        let (object_class, array_class) = unsafe {
            (
                qjs::JS_GetClassID(object.as_raw()),
                qjs::JS_GetClassID(array.as_raw()),
            )
        };
        Ok(Reader {
            object_proto: address(&object_proto),
            array_proto: address(&array_proto),
            object_class,
            array_class,
            max_bytes,
        })
    }

    /// Reads `value` as the encoder would encode it. Iterative: depth costs no native stack.
    pub(crate) fn read<'js>(&self, ctx: &Ctx<'js>, value: rquickjs::Value<'js>) -> Read {
        let mut stack: Vec<OpenRead<'js>> = Vec::new();
        // An upper bound on the JSON text's length in bytes.
        let mut bytes = 0u64;
        let mut next = Some(value);
        let mut done: Option<Value> = None;
        loop {
            if let Some(value) = next.take() {
                match self.visit(ctx, value, stack.len(), &mut bytes) {
                    Visit::Leaf(leaf) => done = Some(leaf),
                    Visit::Open(open) => stack.push(open),
                    Visit::Unfit => return Read::Unfit,
                    Visit::Encode => return Read::Encode,
                }
            }
            let Some(top) = stack.last_mut() else {
                return match done {
                    Some(value) if bytes <= self.max_bytes => Read::Data(value),
                    _ => Read::Encode,
                };
            };
            match top {
                OpenRead::Array {
                    array,
                    len,
                    next: index,
                    items,
                } => {
                    items.extend(done.take());
                    if *index < *len {
                        // SAFETY: an index atom is a tagged integer up to 2^31 − 1 and owned
                        // (freed below) above it.
                        let atom = unsafe { qjs::JS_NewAtomUInt32(raw(ctx), *index) };
                        if atom == qjs::JS_ATOM_NULL {
                            drop(ctx.catch());
                            return Read::Encode;
                        }
                        let item = own_property(ctx, array, atom);
                        // SAFETY: the atom made above, freed once.
                        unsafe { qjs::JS_FreeAtom(raw(ctx), atom) };
                        match item {
                            Own::Data(item) => next = Some(item),
                            Own::Other => return Read::Encode,
                        }
                        *index += 1;
                        bytes += 1;
                        continue;
                    }
                }
                OpenRead::Object {
                    object,
                    keys,
                    next: index,
                    map,
                    key,
                } => {
                    if let Some(value) = done.take() {
                        map.insert(std::mem::take(key), value);
                    }
                    if *index < keys.len {
                        let atom = keys.atom(*index);
                        let Some(name) = atom_text(ctx, atom) else {
                            return Read::Unfit;
                        };
                        match own_property(ctx, object, atom) {
                            Own::Data(value) => next = Some(value),
                            Own::Other => return Read::Encode,
                        }
                        bytes += string_bound(name.len()) + 2;
                        *key = name;
                        *index += 1;
                        continue;
                    }
                }
            }
            bytes += 2;
            done = stack.pop().map(|open| match open {
                OpenRead::Array { items, .. } => Value::Array(items),
                OpenRead::Object { map, .. } => Value::Object(map),
            });
        }
    }

    fn visit<'js>(
        &self,
        ctx: &Ctx<'js>,
        value: rquickjs::Value<'js>,
        depth: usize,
        bytes: &mut u64,
    ) -> Visit<'js> {
        if let Some(n) = value.as_int() {
            *bytes += NUMBER_BYTES;
            return Visit::Leaf(Value::from(n));
        }
        if let Some(f) = value.as_float() {
            *bytes += NUMBER_BYTES;
            return match number(f) {
                Some(Some(n)) => Visit::Leaf(n),
                Some(None) => Visit::Unfit,
                None => Visit::Encode,
            };
        }
        if let Some(b) = value.as_bool() {
            *bytes += 5;
            return Visit::Leaf(Value::Bool(b));
        }
        if value.is_null() {
            *bytes += 4;
            return Visit::Leaf(Value::Null);
        }
        if let Some(text) = value.as_string() {
            // A lone surrogate is not UTF-8: the text does not convert.
            return match text.to_string() {
                Ok(text) => {
                    *bytes += string_bound(text.len());
                    Visit::Leaf(Value::String(text))
                }
                Err(rquickjs::Error::Utf8(_)) => Visit::Unfit,
                Err(_) => {
                    drop(ctx.catch());
                    Visit::Encode
                }
            };
        }
        if !value.is_object() {
            // `undefined`, a symbol, a BigInt.
            return Visit::Unfit;
        }
        if value.is_proxy() {
            return Visit::Encode;
        }
        // SAFETY: a live object of this context.
        let class = unsafe { qjs::JS_GetClassID(value.as_raw()) };
        if class != self.object_class && class != self.array_class {
            return if value.is_function() {
                Visit::Unfit
            } else {
                Visit::Encode
            };
        }
        if depth >= MAX_DEPTH {
            return Visit::Unfit;
        }
        let Some(object) = value.as_object() else {
            return Visit::Encode;
        };
        let proto = object.get_prototype().map(|proto| address(&proto));
        if class == self.array_class {
            if proto != Some(self.array_proto) {
                return Visit::Unfit;
            }
            let mut len = 0i64;
            // SAFETY: an ordinary array's length is a data property: nothing runs.
            let status = unsafe { qjs::JS_GetLength(raw(ctx), value.as_raw(), &mut len) };
            let Ok(len) = u32::try_from(len) else {
                return Visit::Encode;
            };
            if status < 0 {
                drop(ctx.catch());
                return Visit::Encode;
            }
            return Visit::Open(OpenRead::Array {
                array: value,
                len,
                next: 0,
                items: Vec::new(),
            });
        }
        if proto.is_some_and(|proto| proto != self.object_proto) {
            return Visit::Unfit;
        }
        let Some(keys) = Keys::of(ctx, &value) else {
            drop(ctx.catch());
            return Visit::Encode;
        };
        Visit::Open(OpenRead::Object {
            map: Map::with_capacity(keys.len.min(64) as usize),
            object: value,
            keys,
            next: 0,
            key: String::new(),
        })
    }
}

/// A key as text; `None` for a lone surrogate (or a key the interpreter cannot convert).
fn atom_text(ctx: &Ctx<'_>, atom: qjs::JSAtom) -> Option<String> {
    let mut len = 0;
    // SAFETY: `atom` is live (held by the key table); the C string is freed once below.
    unsafe {
        let ptr: *const c_char = qjs::JS_AtomToCStringLen(raw(ctx), &mut len, atom);
        if ptr.is_null() {
            drop(ctx.catch());
            return None;
        }
        let bytes = std::slice::from_raw_parts(ptr.cast::<u8>(), len as usize);
        let text = std::str::from_utf8(bytes).ok().map(str::to_owned);
        qjs::JS_FreeCString(raw(ctx), ptr);
        text
    }
}

/// The most JSON bytes a string of `utf8` bytes takes (`\u00XX` for a control character).
fn string_bound(utf8: usize) -> u64 {
    2 + 6 * utf8 as u64
}

/// The value the encoder's text for `f` parses to: `Some(None)` when it refuses `f`, `None`
/// for an integer past 2^53, which it prints rounded to its shortest digits.
fn number(f: f64) -> Option<Option<Value>> {
    if !f.is_finite() || (f == 0.0 && f.is_sign_negative()) {
        return Some(None);
    }
    if f.fract() != 0.0 {
        return Some(Number::from_f64(f).map(Value::Number));
    }
    if f.abs() <= EXACT_INTEGER {
        // Exact: the encoder prints these digits, which parse as an integer.
        return Some(Some(Value::from(f as i64)));
    }
    if f.abs() >= 1e21 {
        // Printed with an exponent, which parses as this float.
        return Some(Number::from_f64(f).map(Value::Number));
    }
    None
}

/// An object or array being built in the interpreter.
enum OpenWrite<'a, 'js> {
    Array {
        items: std::slice::Iter<'a, Value>,
        built: Vec<rquickjs::Value<'js>>,
    },
    Object {
        entries: serde_json::map::Iter<'a>,
        object: rquickjs::Value<'js>,
        key: &'a str,
    },
}

/// Builds `value` in the interpreter as `JSON.parse` of its text would: own data properties
/// (a `"__proto__"` key is an ordinary property), numbers as doubles. Iterative. Fails only when
/// the interpreter is out of memory.
pub(crate) fn write<'js>(ctx: &Ctx<'js>, value: &Value) -> rquickjs::Result<rquickjs::Value<'js>> {
    let mut stack: Vec<OpenWrite<'_, 'js>> = Vec::new();
    let mut next = Some(value);
    let mut done: Option<rquickjs::Value<'js>> = None;
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Array(items) => stack.push(OpenWrite::Array {
                    items: items.iter(),
                    built: Vec::with_capacity(items.len()),
                }),
                Value::Object(map) => {
                    // SAFETY: a new object owned by the wrapper.
                    let object = unsafe {
                        let object = qjs::JS_NewObject(raw(ctx));
                        if qjs::JS_IsException(object) {
                            return Err(rquickjs::Error::Exception);
                        }
                        rquickjs::Value::from_raw(ctx.clone(), object)
                    };
                    stack.push(OpenWrite::Object {
                        entries: map.iter(),
                        object,
                        key: "",
                    });
                }
                leaf => done = Some(scalar(ctx, leaf)?),
            }
        }
        let Some(top) = stack.last_mut() else {
            return Ok(done.unwrap_or_else(|| rquickjs::Value::new_null(ctx.clone())));
        };
        match top {
            OpenWrite::Array { items, built } => {
                built.extend(done.take());
                if let Some(item) = items.next() {
                    next = Some(item);
                    continue;
                }
            }
            OpenWrite::Object {
                entries,
                object,
                key,
            } => {
                if let Some(value) = done.take() {
                    define(ctx, object, key, value)?;
                }
                if let Some((name, value)) = entries.next() {
                    *key = name;
                    next = Some(value);
                    continue;
                }
            }
        }
        done = match stack.pop() {
            Some(OpenWrite::Array { built, .. }) => Some(array_from(ctx, built)?),
            Some(OpenWrite::Object { object, .. }) => Some(object),
            None => None,
        };
    }
}

fn scalar<'js>(ctx: &Ctx<'js>, value: &Value) -> rquickjs::Result<rquickjs::Value<'js>> {
    Ok(match value {
        Value::Null => rquickjs::Value::new_null(ctx.clone()),
        Value::Bool(b) => rquickjs::Value::new_bool(ctx.clone(), *b),
        Value::Number(n) => rquickjs::Value::new_number(ctx.clone(), n.as_f64().unwrap_or(0.0)),
        Value::String(s) => rquickjs::String::from_str(ctx.clone(), s)?.into_value(),
        Value::Array(_) | Value::Object(_) => unreachable!("containers are built by `write`"),
    })
}

fn define<'js>(
    ctx: &Ctx<'js>,
    object: &rquickjs::Value<'js>,
    key: &str,
    value: rquickjs::Value<'js>,
) -> rquickjs::Result<()> {
    // SAFETY: `object` is a live object of this context; the atom is freed once; the value's
    // reference passes to QuickJS, which frees it whatever happens.
    unsafe {
        let atom = qjs::JS_NewAtomLen(raw(ctx), key.as_ptr().cast(), key.len() as _);
        if atom == qjs::JS_ATOM_NULL {
            return Err(rquickjs::Error::Exception);
        }
        let value = into_raw(ctx, value);
        let status = qjs::JS_DefinePropertyValue(
            raw(ctx),
            object.as_raw(),
            atom,
            value,
            qjs::JS_PROP_C_W_E as i32,
        );
        qjs::JS_FreeAtom(raw(ctx), atom);
        if status < 0 {
            return Err(rquickjs::Error::Exception);
        }
    }
    Ok(())
}

fn array_from<'js>(
    ctx: &Ctx<'js>,
    built: Vec<rquickjs::Value<'js>>,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    let Ok(count) = i32::try_from(built.len()) else {
        return Err(rquickjs::Error::Unknown);
    };
    let raws: Vec<qjs::JSValue> = built.into_iter().map(|item| into_raw(ctx, item)).collect();
    // SAFETY: QuickJS takes the references of `raws` whether or not it succeeds.
    unsafe {
        let array = qjs::JS_NewArrayFrom(raw(ctx), count, raws.as_ptr());
        if qjs::JS_IsException(array) {
            return Err(rquickjs::Error::Exception);
        }
        Ok(rquickjs::Value::from_raw(ctx.clone(), array))
    }
}

/// The value's own reference, for a QuickJS call that takes it over. (Forgetting the wrapper
/// instead would keep its context alive.)
fn into_raw(ctx: &Ctx<'_>, value: rquickjs::Value<'_>) -> qjs::JSValue {
    // SAFETY: the duplicate is the reference handed over; the wrapper gives back its own.
    unsafe { qjs::JS_DupValue(raw(ctx), value.as_raw()) }
}
