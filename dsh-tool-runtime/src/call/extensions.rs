//! Typed extensions of a call: a map from a type to one value of it, in the shape of
//! `http::Extensions`. What a feature attaches to a call (a durable run's journal, a binding
//! call's park slot) rides here, so the call types carry no field of their own for it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;

/// A value the map can hold: any `Clone + Send + Sync` type, cloned with the map.
trait Extension: Any + Send + Sync {
    fn clone_box(&self) -> Box<dyn Extension>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Clone + Send + Sync + 'static> Extension for T {
    fn clone_box(&self) -> Box<dyn Extension> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// One value per type; empty (and unallocated) by default.
#[derive(Default)]
pub struct Extensions {
    /// Boxed: the map is one pointer in every call that carries none (most), where an inline
    /// `HashMap` is six words moved with the call through each stage.
    #[allow(clippy::box_collection)] // the box is the point: one word instead of six
    map: Option<Box<HashMap<TypeId, Box<dyn Extension>>>>,
}

impl Extensions {
    /// Stores `value`, returning the value of its type stored before.
    pub fn insert<T: Clone + Send + Sync + 'static>(&mut self, value: T) -> Option<T> {
        self.map
            .get_or_insert_with(Box::default)
            .insert(TypeId::of::<T>(), Box::new(value))
            .and_then(|old| old.into_any().downcast().ok().map(|old| *old))
    }

    /// The value of type `T`, if one is stored.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.map
            .as_ref()?
            .get(&TypeId::of::<T>())
            .and_then(|value| (**value).as_any().downcast_ref())
    }

    /// The value of type `T`, stored as `T::default()` first when there is none.
    pub fn get_or_default<T: Default + Clone + Send + Sync + 'static>(&mut self) -> &mut T {
        let value = self
            .map
            .get_or_insert_with(Box::default)
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(T::default()));
        (**value)
            .as_any_mut()
            .downcast_mut()
            .expect("a value is stored under its own type's id")
    }

    /// Takes the value of type `T` out, if one is stored.
    pub fn remove<T: Send + Sync + 'static>(&mut self) -> Option<T> {
        self.map
            .as_mut()?
            .remove(&TypeId::of::<T>())
            .and_then(|value| value.into_any().downcast().ok().map(|value| *value))
    }
}

impl Clone for Extensions {
    fn clone(&self) -> Self {
        Extensions {
            map: self.map.as_ref().map(|map| {
                Box::new(
                    map.iter()
                        .map(|(id, value)| (*id, (**value).clone_box()))
                        .collect(),
                )
            }),
        }
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.map.as_ref().map_or(0, |map| map.len()))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::Extensions;

    #[derive(Debug, Clone, PartialEq)]
    struct Journal(&'static str);

    #[derive(Debug, Clone, PartialEq)]
    struct Slot(u32);

    #[test]
    fn one_value_per_type() {
        let mut extensions = Extensions::default();
        assert_eq!(extensions.get::<Journal>(), None);
        assert_eq!(extensions.insert(Journal("a")), None);
        assert_eq!(extensions.insert(Slot(1)), None);
        assert_eq!(extensions.insert(Journal("b")), Some(Journal("a")));
        assert_eq!(extensions.get::<Journal>(), Some(&Journal("b")));
        assert_eq!(extensions.get::<Slot>(), Some(&Slot(1)));
        assert_eq!(extensions.remove::<Slot>(), Some(Slot(1)));
        assert_eq!(extensions.get::<Slot>(), None);
    }

    #[test]
    fn a_missing_value_is_made_by_default_once() {
        let mut extensions = Extensions::default();
        extensions.get_or_default::<Vec<u32>>().push(1);
        extensions.get_or_default::<Vec<u32>>().push(2);
        assert_eq!(extensions.get::<Vec<u32>>(), Some(&vec![1, 2]));
    }

    #[test]
    fn a_clone_owns_its_values() {
        let mut extensions = Extensions::default();
        extensions.insert(Journal("a"));
        let copy = extensions.clone();
        extensions.remove::<Journal>();
        assert_eq!(copy.get::<Journal>(), Some(&Journal("a")));
        assert_eq!(extensions.get::<Journal>(), None);
    }
}
