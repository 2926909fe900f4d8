// The help texts of the catalog commands, apart from them so that --help loads nothing else.

/** `catalog diff` exits with this when any configuration's price or orderability changes (0: none, 1: error). */
export const PRICES_CHANGE_EXIT_CODE = 3;
/** How many changed configurations per product the text output of `catalog diff` lists without --all. */
export const ROW_LIMIT = 20;

export const catalogHelp: Record<string, string> = {
  'catalog check': `usage: agent-audio catalog check [--json]

Validates catalog/ (CATALOG_DIR) and rules/ (RULES_DIR) as the service would load them.
Prints each problem once, as file:line:column: message with the offending line and a caret.
  --json   one JSON document: {ok, diagnostics: [{file, line, column, code, message}]} on stdout
exit 0: valid, 1: problems found`,
  'catalog diff': `usage: agent-audio catalog diff [--against REF|DIR] [--json] [--all] [--progress]

What the catalog and rules on disk change compared with another version: per product the fields and the rules that
changed, and a price table: the same grid of configurations (each parameter's minimum and maximum, three points between
for the parameters the price rules read, every package boundary) priced before and after, with the change in atomic
units and percent, and which configurations become or stop being orderable by agents.
  --against REF   a git commit, branch or tag: catalog/ and rules/ as committed there (e.g. HEAD)
  --against DIR   a folder holding catalog/ and rules/ (another checkout)
  (default)       what the service running on DATA_DIR serves (its content hash in GET /api/v1/health)
  --json          the whole comparison as one JSON document on stdout
  --all           list every changed configuration (the text output shows the first ${ROW_LIMIT} per product)
  --progress      "pricing PRODUCT: N/M configurations" lines on stderr (the default when stderr is a terminal)
exit 0: no price or orderability changes, ${PRICES_CHANGE_EXIT_CODE}: prices change, 1: error (e.g. the files on disk are invalid)`,
  'catalog preview': `usage: agent-audio catalog preview PRODUCT [--param NAME=VALUE ...] [--billing monthly|annual|one_time] [--extend-hours N] [--stop-after-hours H [--transfer-used-gb G]] [--json]

Prices one configuration from the files on disk, without the service or a database: the price lines, the total,
whether agents can order it, and the rules that fired. VALUE is read as JSON when it parses (2, true, "x"), else as text.
With --extend-hours N: what extending a service with these parameters (duration_hours = the hours it has paid) by N
hours costs (POST /services/{id}/extend): the price of the new total minus the price of the paid hours, within the
order limits.
With --stop-after-hours, also the refund rules/refunds.json gives if the service is stopped after H hours (having
used G GB of transfer).
exit 0: priced, 1: not priced (the reason is printed) or the files are invalid`,
};
