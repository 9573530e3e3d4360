// Negative control for the types (web/test.sh): tsc must report an error on each
// line marked "error:" and on no other line.
import * as wmx from "wmx";

const x = wmx.ones([2, 2]);
wmx.zeros([2], "float64x"); // error: not a DType
x.sum("all"); // error: axes are numbers
wmx.add(x, "1"); // error: strings are not arrays
x.slice([[0, 1, 1, 5]]); // error: a slice entry has at most 3 numbers
const n: number = x.data(); // error: data() is a Promise
wmx.tidy(async () => x).valueOf(); // error: tidy is synchronous (never)
wmx.grad((a: wmx.NdArray) => a.sum())(x, x); // error: one argument
export { n };
