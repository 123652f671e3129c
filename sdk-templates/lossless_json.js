// Shared by both JavaScript bootstraps (worker.mjs, embedded_quickjs.js), which include it where
// they say `/* @include lossless_json.js */`; it reads their `LONE_SURROGATE` and `maxDepth`.
class Unfit extends Error {}

// Lossless JSON encoding without recursion: plain objects and dense arrays of finite numbers
// (not -0), well-formed strings, booleans and null, at most maxDepth levels deep.
function encode(root) {
  // The pieces are joined into a chunk every 4096 of them: one array slot and one string per
  // piece would take tens of times the text (`[1,1,…]` as pieces: two per two bytes).
  const chunks = [];
  let out = [];
  const stack = [];
  let value = root;
  for (;;) {
    if (out.length >= 4096) {
      chunks.push(out.join(''));
      out = [];
    }
    if (value === null) {
      out.push('null');
    } else {
      switch (typeof value) {
        case 'boolean':
          out.push(value ? 'true' : 'false');
          break;
        case 'number':
          if (!Number.isFinite(value) || Object.is(value, -0)) throw new Unfit('lossy');
          out.push(JSON.stringify(value));
          break;
        case 'string':
          if (LONE_SURROGATE.test(value)) throw new Unfit('lossy');
          out.push(JSON.stringify(value));
          break;
        case 'object': {
          if (stack.length >= maxDepth) throw new Unfit('deep');
          const proto = Object.getPrototypeOf(value);
          if (Array.isArray(value)) {
            if (proto !== Array.prototype) throw new Unfit('lossy');
            out.push('[');
            stack.push({ array: value, index: 0 });
          } else {
            if (proto !== Object.prototype && proto !== null) throw new Unfit('lossy');
            out.push('{');
            stack.push({ object: value, keys: Object.keys(value), index: 0 });
          }
          break;
        }
        default:
          throw new Unfit('lossy');
      }
    }
    for (;;) {
      const top = stack[stack.length - 1];
      if (top === undefined) {
        chunks.push(out.join(''));
        return chunks.join('');
      }
      if (top.array) {
        if (top.index < top.array.length) {
          if (top.index > 0) out.push(',');
          if (!(top.index in top.array)) throw new Unfit('lossy');
          value = top.array[top.index++];
          break;
        }
        out.push(']');
      } else {
        if (top.index < top.keys.length) {
          if (top.index > 0) out.push(',');
          const key = top.keys[top.index++];
          if (LONE_SURROGATE.test(key)) throw new Unfit('lossy');
          out.push(JSON.stringify(key), ':');
          value = top.object[key];
          break;
        }
        out.push('}');
      }
      stack.pop();
    }
  }
}
