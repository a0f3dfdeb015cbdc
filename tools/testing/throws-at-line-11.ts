// Loaded by tools/register.spec.ts: throws on line 11 of this file, after a type that the
// compiled JavaScript drops, so only a source map puts the frame on this line.
type Shape = {
  readonly sides: number;
  readonly name: string;
  readonly angles: number;
  readonly area: number;
  readonly perimeter: number;
};
const sides: Shape['sides'] = 4;
throw new Error(`thrown with ${sides} sides`);
