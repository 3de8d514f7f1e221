Summarize the conversation that follows, between a user and a coding assistant. The assistant will continue the work from your summary alone.
{% if previous_summary %}

Summary of the earlier part:
{{ previous_summary }}
{% endif %}

Write four short sections, each a few lines:
## Goal
What the user asked for, in the user's words.
## Done
What was changed, with the exact file paths, function names and commands.
## Errors
The exact error messages, and whether each was fixed.
## Next
What the assistant was doing at the end, and the next step.

Write each fact once. Do not answer the user. Do not write code.
{% if custom_instructions %}

Pay particular attention to: {{ custom_instructions }}
{% endif %}
