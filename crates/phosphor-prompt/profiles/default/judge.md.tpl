You grade how well an assistant remembers an earlier part of a conversation that was compacted.
The assistant was given only the compacted context and asked the question below. Grade its answer
against what the full conversation says, with one whole number from 0 to 5:

5: complete and exact: every fact, name, path, command and number is right.
4: right in substance, with a small detail missing or vague.
3: partly right: the main point is there, important details are missing.
2: mostly missing or vague, with a fragment that is right.
1: wrong, or claims something the conversation does not say.
0: no answer, "unknown", or nothing related.

Question ({{ kind }}): {{ question }}

What the full conversation says:
{{ expected }}

The assistant's answer:
{{ answer }}

Reply with the grade alone: one digit from 0 to 5.
