/**
 * Division of non-negative integers below 2^53, exact whatever the double rounding of `a / b`
 * (the quotient is corrected by one step either way).
 */
export function floorDiv(a: number, b: number): number {
  let quotient = Math.floor(a / b);
  if (quotient * b > a) quotient -= 1;
  else if ((quotient + 1) * b <= a) quotient += 1;
  return quotient;
}

export function ceilDiv(a: number, b: number): number {
  const quotient = floorDiv(a, b);
  return quotient * b === a ? quotient : quotient + 1;
}
