// ==== annotations on variables
const a: number = 1
let b: string | undefined = 'x'
var c: Array<{ k: number }> = [{ k: 2 }]
console.log(a, b, c)
// ==== multi-line object type annotation
const point: {
  x: number;
  y: number
} = { x: 1, y: 2 }
console.log(point.x + point.y)
// ==== function parameter and return annotations
function add(x: number, y: number): number {
  return x + y
}
console.log(add(2, 3))
// ==== optional and default parameters
function greet(name?: string, greeting: string = 'hi'): string {
  return `${greeting} ${name ?? 'nobody'}`
}
console.log(greet(), greet('ann'), greet('bo', 'yo'))
// ==== destructuring with types
const { p, q }: { p: number; q: string } = { p: 1, q: 'two' }
const [r, s]: [number, boolean] = [3, true]
console.log(p, q, r, s)
// ==== rest parameters typed
function sum(...xs: number[]): number { return xs.reduce((t, v) => t + v, 0) }
console.log(sum(1, 2, 3, 4))
// ==== generic function
function first<T>(xs: T[]): T | undefined {
  return xs[0]
}
console.log(first([5, 6]), first<string>(['z']))
// ==== generic constraints and defaults
function pick<T extends object, K extends keyof T = keyof T>(o: T, k: K): T[K] {
  return o[k]
}
console.log(pick({ a: 1, b: 'b' }, 'b'))
// ==== multi-line type parameters on a function
function pair<
  A,
  B extends string = string,
>(a: A, b: B): [A, B] {
  return [a, b]
}
console.log(pair(1, 'x'))
// ==== generic arrow
const id = <T,>(x: T): T => x
console.log(id(7), id('seven'))
// ==== async generic arrow with extends
const later = async <T extends number>(x: T): Promise<T> => x
console.log(await later(3))
// ==== async arrow with multi-line type parameters
const wrap = async <
  T,
>(x: T) => [x]
console.log(await wrap('w'))
// ==== async arrow with multi-line type parameters and parameter list
const wrap2 = async <
  T extends string,
  U = number,
>(
  x: T,
  y?: U,
) => `${x}:${y}`
console.log(await wrap2('a', 1))
// ==== arrow with multi-line return type
const mk = (n: number):
  { n: number } => ({ n })
console.log(mk(4).n)
// ==== arrow with multi-line return type object
const mk2 = (n: number): {
  doubled: number
} => ({ doubled: n * 2 })
console.log(mk2(4).doubled)
// ==== async arrow with multi-line return type
const fetchIt = async (n: number):
  Promise<number> => n + 1
console.log(await fetchIt(1))
// ==== arrow returning a function type annotation
const curry = (a: number): ((b: number) => number) => (b) => a * b
console.log(curry(3)(4))
// ==== arrow with function type parameter
const apply = (f: (x: number) => string, v: number): string => f(v)
console.log(apply((x) => 'v' + x, 9))
// ==== type alias then a parenthesised expression
let t1 = 1
type Num = number
;(() => console.log('iife', t1))()
// ==== interface without semicolons between statements
const i1 = 2
interface Shape {
  area(): number
}
const sq: Shape = { area: () => i1 * i1 }
console.log(sq.area())
// ==== type alias before a template literal
const tag = (s: TemplateStringsArray) => s[0]
let tv = 'x'
type Unused = string
console.log(`${tv}-template`)
// ==== overloaded function
function len(x: string): number
function len(x: unknown[]): number
function len(x: string | unknown[]): number {
  return x.length
}
console.log(len('abc'), len([1, 2]))
// ==== declare statements
declare const injected: number
declare function external(x: number): void
declare let maybe: string
declare class Ext { m(): void }
console.log(typeof injected === 'undefined' ? 'no injected' : 'injected')
// ==== declare global and module
declare global {
  interface Window { z: number }
}
declare module 'virtual' {
  export const v: number
}
console.log('declared')
// ==== declare enum and namespace are erased
declare enum Color { Red, Green }
declare namespace NS { const x: number }
console.log('erased')
// ==== satisfies
const cfg = { port: 80, host: 'h' } satisfies Record<string, string | number>
console.log(cfg.port)
// ==== as and as const
const arr = [1, 2, 3] as const
const n1 = (JSON.parse('5') as number) + 1
const n2 = ('7' as unknown as string).length
console.log(arr.length, n1, n2)
// ==== non-null assertions
const m1 = new Map<string, number>([['a', 1]])
const got = m1.get('a')!
const o1: { v?: { w: number } } = { v: { w: 3 } }
console.log(got + o1.v!.w)
// ==== definite assignment
let later2!: number
later2 = 5
console.log(later2)
// ==== prefix type assertion on one line
const s1 = <string>'abc'
console.log(s1.toUpperCase())
// ==== class with typed fields and modifiers
class Counter {
  private count: number = 0
  public readonly name: string
  protected step = 1
  constructor(name: string) { this.name = name }
  public inc(): this { this.count += this.step; return this }
  get value(): number { return this.count }
}
console.log(new Counter('c').inc().inc().value)
// ==== class member modifiers before computed keys
const key = 'dyn'
class K1 {
  x = 1
  private [key] = 2
  public ['lit']() { return 3 }
}
const k1 = new K1()
console.log(k1.x, (k1 as any).dyn, k1.lit())
// ==== class member modifiers before generator methods
class G1 {
  v = [1, 2]
  public *items() { yield* this.v }
}
console.log([...new G1().items()])
// ==== class member modifiers before string keys
class S1 {
  a = 'a'
  readonly 'b-c' = 'bc'
}
console.log(new S1()['b-c'])
// ==== declare and index signature members
class D1 {
  [k: string]: unknown
  declare hidden: number
  shown = 1
}
console.log(Object.keys(new D1()))
// ==== abstract class
abstract class Animal {
  abstract sound(): string
  abstract readonly legs: number
  speak(): string { return this.sound() + '!' }
}
class Dog extends Animal {
  legs = 4
  sound() { return 'woof' }
}
console.log(new Dog().speak(), new Dog().legs)
// ==== implements across lines
interface A1 { a(): number }
interface B1 { b(): number }
class AB implements
  A1,
  B1 {
  a() { return 1 }
  b() { return 2 }
}
console.log(new AB().a() + new AB().b())
// ==== generic class
class Box<T> {
  constructor(public_: T) { this.v = public_ }
  v: T
  map<U>(f: (t: T) => U): Box<U> { return new Box<U>(f(this.v)) }
}
console.log(new Box(2).map((x) => x * 10).v)
// ==== class extends generic base
class Base<T> { t?: T }
class Derived extends Base<number> {
  override t = 5
}
console.log(new Derived().t)
// ==== overloaded methods
class O1 {
  f(x: number): number
  f(x: string): string
  f(x: any): any { return x }
}
console.log(new O1().f(1), new O1().f('s'))
// ==== optional methods and properties
class Op {
  maybe?: number
  m?(): number { return 1 }
}
console.log(new Op().maybe, new Op().m?.())
// ==== this parameter
function whoami(this: { who: string }, suffix: string) { return this.who + suffix }
console.log(whoami.call({ who: 'me' }, '!'))
// ==== type predicates and asserts
function isStr(x: unknown): x is string { return typeof x === 'string' }
function assertNum(x: unknown): asserts x is number { if (typeof x !== 'number') throw new Error('no') }
assertNum(3)
console.log(isStr('a'), isStr(1))
// ==== conditional, mapped and template literal types
type IsS<T> = T extends string ? true : false
type Ro<T> = { readonly [K in keyof T]: T[K] }
type Ev = `on${string}`
const ev: Ev = 'onclick'
console.log(ev)
// ==== typeof and keyof in annotations
const base = { a: 1, b: 2 }
const keys: Array<keyof typeof base> = ['a', 'b']
console.log(keys.map((k) => base[k]))
// ==== unique symbol and tuples
const sym: unique symbol = Symbol('s')
const tup: [a: number, b?: string, ...rest: boolean[]] = [1, 'x', true]
console.log(typeof sym, tup.length)
// ==== generic call with type arguments
const mp = new Map<string, Array<number>>()
mp.set('a', [1])
const st = new Set<number>([1, 1, 2])
console.log(mp.get('a'), st.size)
// ==== generic call with type arguments across lines
const parsed = JSON.parse<
  any
>
console.log(typeof parsed)
// ==== object literal methods with types
const obj = {
  twice(x: number): number { return x * 2 },
  get g(): string { return 'g' },
  set s(v: string) { },
}
console.log(obj.twice(4), obj.g)
// ==== optional chaining with non-null
const deep: { a?: { b?: { c: number } } } = { a: { b: { c: 1 } } }
console.log(deep.a?.b!.c)
// ==== async function with annotations
async function load(n: number): Promise<Array<number>> {
  await null
  return [n]
}
console.log(await load(2))
// ==== generator with annotations
function* gen(): Generator<number, void, unknown> {
  yield 1
  yield 2
}
console.log([...gen()])
// ==== catch clause annotation
try {
  throw new Error('caught')
} catch (e: unknown) {
  console.log((e as Error).message)
}
// ==== for-of with typed declarations
for (const [k, v] of Object.entries({ a: 1 }) as [string, number][]) {
  console.log(k, v)
}
// ==== labelled loops and types
outer: for (let i: number = 0; i < 3; i++) {
  for (let j: number = 0; j < 3; j++) {
    if (j === 1) continue outer
    console.log(i, j)
  }
}
// ==== return value is typed
const result: { ok: boolean } = { ok: true }
return result
// ==== return with as
return { n: 1 } as { n: number }
// ==== return with satisfies over a multi-line type
return { n: 2 } satisfies {
  n: number
}
// ==== erased interface before return
const rv = 5
interface Ignored { x: number }
return rv
// ==== type-only arrow parameter objects
const area = ({ w, h }: { w: number; h: number }): number => w * h
console.log(area({ w: 2, h: 3 }))
// ==== arrow with default typed parameter
const dflt = (x: number = 10, y?: number): number => x + (y ?? 0)
console.log(dflt(), dflt(1, 2))
// ==== nested generics with shifts
const nested: Array<Array<Map<string, number>>> = [[new Map([['a', 1]])]]
console.log(nested[0][0].get('a') >> 0)
// ==== comparisons that look like generics
const lt = 1, gt = 2
console.log(lt < gt, gt > lt, lt < gt && gt > lt)
// ==== class expression with types
const Anon = class<T> {
  v: T | null = null
}
console.log(new Anon<number>().v)
// ==== static members with modifiers
class St {
  private static count: number = 0
  public static readonly label = 'st'
  static inc(): number { return ++St.count }
}
console.log(St.inc(), St.inc(), St.label)
// ==== getters and setters with modifiers
class GS {
  private _v = 0
  public get v(): number { return this._v }
  public set v(x: number) { this._v = x }
}
const gs = new GS(); gs.v = 3
console.log(gs.v)
// ==== override and readonly on fields
class P0 { x = 1 }
class P1 extends P0 {
  override readonly x = 2
}
console.log(new P1().x)
// ==== throw after blanked lines
type Blank1 = {
  a: string
}
interface Blank2 {
  b: number
}
const boom: any = null
boom.explode() // @throws
// ==== throw inside a typed function
function deepFail(x: number): never {
  throw new RangeError('bad ' + x) // @throws
}
deepFail(3)
// ==== throw after multi-line arrow return type
const f3 = (a: number):
  number => a
console.log(f3(1))
null.x // @throws
// ==== throw after async arrow with multi-line type parameters
const f4 = async <
  T,
>(x: T) => x
await f4(1)
undefined.y // @throws
// ==== throw inside a class method
class Thrower {
  private readonly why: string = 'class'
  go(): void {
    throw new TypeError(this.why) // @throws
  }
}
new Thrower().go()
// ==== throw after overloads
function ov(x: number): number
function ov(x: string): string
function ov(x: any) { return x }
ov(1)
JSON.parse('{') // @throws
