// Package filter implements the Service Bus subscription rule language:
// correlation filters, SQL filter expressions and SQL rule actions.
//
// The broker compiles a rule once, when it is created, and evaluates it for
// every message published to the topic:
//
//	f, err := filter.Compile("color = 'red' AND quantity > 10 AND sys.Label LIKE 'ord%'")
//	ok, err := f.Match(msg) // msg implements filter.Message
//
// Every filter kind ([*SQLFilter], [*CorrelationFilter], [TrueFilter],
// [FalseFilter]) implements [Filter]. [CompileAction] compiles a rule
// action that is applied with [Action.Apply] to a [MutableMessage].
//
// # Language
//
// The SQL dialect follows the Service Bus "SQL filter syntax" and "SQL rule
// action syntax" references:
//
//   - comparison = <> != < <= > >=, arithmetic + - * / %, unary + and -;
//   - AND, OR, NOT with three-valued logic; [NOT] LIKE with % and _ and an
//     optional ESCAPE; [NOT] IN (list); IS [NOT] NULL; EXISTS(property);
//   - properties sys.Name (system; case-insensitive; Subject is an alias of
//     Label), user.name or plain name (application; case-sensitive), with
//     [delimited] or "quoted" names for anything that is not a regular
//     identifier;
//   - constants: 'strings' (a doubled quote stands for one), integers (int64), decimals
//     and exponents (float64), TRUE, FALSE, NULL;
//   - functions newid() and property(name) (alias p(name)); name may be
//     "sys.X" or "user.x";
//   - @name parameters, bound when compiling with [CompileWithParameters]
//     or [CompileActionWithParameters].
//
// Keywords are case-insensitive. Precedence, loosest first: OR, AND, NOT,
// comparison/LIKE/IN/IS, + -, * / %, unary sign.
//
// # Semantics
//
// A missing application property, an unset system property and NULL are
// unknown. Unknown propagates through arithmetic, comparison, LIKE and the
// left side of IN; AND and OR use the SQL truth tables; IS NULL and EXISTS
// are never unknown. A filter matches only when it evaluates to TRUE.
//
// Numbers compare and combine across widths: integer op integer stays
// int64 (wrapping on overflow, truncating division), anything involving a
// float is float64. Values of kinds that cannot be compared (a string and a
// number, say) are unequal: "=" is FALSE and "<>" is TRUE, while <, <=, >
// and >= are unknown. Strings order ordinally; LIKE is case-sensitive and
// unknown for a non-string value. "+" with a string concatenates.
//
// Referring to a system property that does not exist is a compile error.
// Errors a message can provoke at run time (arithmetic on a boolean,
// integer division by zero, a non-string LIKE pattern, a property used as
// a predicate that does not hold a boolean) are returned as *[EvalError];
// Service Bus calls these filter evaluation exceptions.
//
// # Performance
//
// Compiled filters are immutable trees; evaluation passes values by value
// and does not allocate for comparisons, logic, LIKE and IN. Expressions
// longer than [MaxExpressionLength] are rejected, which also bounds the
// recursion depth of parsing and evaluation.
package filter
