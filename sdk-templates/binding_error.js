// Shared by both JavaScript bootstraps (worker.mjs, embedded_quickjs.js), which include it where
// they say `/* @include binding_error.js */`: the class a namespace's failed calls reject with
// (e.g. `ToolCallError`), carrying the binding's name under `member` and the failure's `code`.
function errorClass(name, member) {
  const cls = class extends Error {
    constructor(bindingName, message, code) {
      super(message);
      Object.defineProperty(this, 'name', { value: name, writable: true, configurable: true });
      this[member] = bindingName;
      this.code = typeof code === 'string' ? code : null;
    }
  };
  Object.defineProperty(cls, 'name', { value: name });
  return cls;
}
