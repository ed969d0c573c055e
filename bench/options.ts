/** The command-line options of a benchmark: `--quick`, and numeric `--name N` options with their defaults. */
export function benchOptions(args: readonly string[]) {
  return {
    quick: args.includes('--quick'),
    /** The number after `name`, or `dflt` when the option is absent. */
    opt(name: string, dflt: number): number {
      const i = args.indexOf(name);
      return i >= 0 ? Number(args[i + 1]) : dflt;
    },
  };
}
