Summarize the conversation that follows, between a user and a coding assistant. The assistant will continue the work from your summary alone.
{% if previous_summary %}

Summary of the earlier part:
{{ previous_summary }}
{% endif %}

Write four sections with the headings "## Goal", "## Done", "## Errors" and "## Next", each followed by a few short lines that start with "- ". Under Goal, quote what the user asked for. Under Done, name each file that was changed, the function or test in it, and the commands that were run. Under Errors, copy each error message and say whether it was fixed (write "- None" if there were none). Under Next, say what the assistant was doing at the end and what comes next.

Write each fact once. Do not answer the user. Do not write code.
{% if custom_instructions %}

Pay particular attention to: {{ custom_instructions }}
{% endif %}
