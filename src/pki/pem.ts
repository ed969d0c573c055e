/**
 * PEM scanning, linear in the text's length. A regular expression such as
 * `/-----BEGIN X-----[\s\S]+?-----END X-----/g` is quadratic on a text of many BEGIN lines without an END (each
 * BEGIN scans to the end of the text): a 1 MiB request body of them held the event loop for tens of seconds.
 */
import { assert } from '../../storage/types.js';

/** The PEM blocks (BEGIN line to END line, inclusive) of one label in a text, in order. */
export function pemBlocks(text: string, label: string): string[] {
  const begin = `-----BEGIN ${label}-----`;
  const end = `-----END ${label}-----`;
  const out: string[] = [];
  let from = 0;
  // each round moves `from` past a block (at least begin + end + 1 characters): at most text.length rounds
  for (let round = 0; round <= text.length; round++) {
    const b = text.indexOf(begin, from);
    if (b < 0) return out;
    // a block has at least one character between its BEGIN and END lines; no END after this BEGIN: no END after
    // any later one either
    const e = text.indexOf(end, b + begin.length + 1);
    if (e < 0) return out;
    out.push(text.slice(b, e + end.length));
    from = e + end.length;
  }
  assert(false, 'PEM scan did not advance');
}
