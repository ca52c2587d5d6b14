"""Opening instructions and action grammars for AgentGym's text environments.

Pure data for the text agents that play AgentGym's env servers (WooooDyy/AgentGym):
- `INSTRUCTIONS[env]`: the first user turn of the ReAct agent (`Thought: ...` then
  `Action: <one action>`), one per env in `kinds.AGENTGYM_ENVS` except WebArena;
- `WEBARENA_INSTRUCTIONS`: the same for the WebArena agent, which reasons freely and
  ends with the action in a ``` fence;
- `ACTION_PATTERNS[env]` / `WEBARENA_ACTION_PATTERN`: regexes that fullmatch ONE valid
  action (the text after `Action: `, or inside WebArena's fence). They use only what
  vLLM's regex-guided decoding accepts (no lookarounds, backreferences or `\\b`; free
  text is always bounded), and every quantifier is bounded, so a match or a refusal
  takes at most milliseconds on any input;
- `EXAMPLES[env]`: a few valid actions per env;
- `TOOLS[env]`: the tool names of the five tool-use envs;
- `step_action(env, action)`: the string to POST to an env's `/step` for the action the
  agent chose, mirroring what AgentGym's own client for that env sends.

The facts (action names, argument syntax, what ends an episode) come from AgentGym's
env clients (`agentenv/agentenv/envs/*.py`) and servers (`agentenv-*/`); the wording
of every instruction is ours.
"""
from __future__ import annotations

TOOL_ENVS = ("weather", "movie", "academia", "todo", "sheet")

# The tools each tool-use env's server dispatches on (its `Action:` name).
TOOLS: dict[str, tuple[str, ...]] = {
    "weather": ("get_user_current_date", "get_user_current_location", "get_historical_temp", "get_historical_rain",
                "get_historical_snow", "get_snow_forecast", "get_current_snow", "get_current_temp",
                "get_latitude_longitude", "get_elevation", "get_temp_forecast", "get_rain_forecast",
                "get_current_rain", "get_distance", "get_historical_air_quality_index",
                "get_current_air_quality_index", "get_air_quality_level", "check_valid_actions", "finish"),
    "movie": ("get_search_movie", "get_movie_details", "get_movie_production_companies",
              "get_movie_production_countries", "get_movie_cast", "get_movie_crew", "get_movie_keywords",
              "get_search_person", "get_person_details", "get_person_cast", "get_person_crew",
              "get_person_external_ids", "get_movie_alternative_titles", "get_movie_translation",
              "check_valid_actions", "finish"),
    "academia": ("loadPaperNet", "loadAuthorNet", "neighbourCheck", "paperNodeCheck", "authorNodeCheck",
                 "authorEdgeCheck", "paperEdgeCheck", "check_valid_actions", "finish"),
    "todo": ("get_user_current_date", "get_user_current_location", "get_projects", "update_project", "get_tasks",
             "get_task_description", "get_task_duration", "complete_task", "update_task", "delete_task",
             "check_valid_actions", "finish"),
    "sheet": ("open_sheet", "del_sheet", "freeze_data", "get_A1_annotation", "insert_cols", "insert_rows",
              "delete_batch_data", "update_cell", "update_cell_by_formula", "update_range", "sort_sheet_by_col",
              "merge_cells", "update_note", "get_all_values", "get_range_values", "get_cell_value",
              "get_value_by_formula", "filter_cells", "get_note", "finish"),
}

# ---------------------------------------------------------------------------------------------------------------
# Instructions
# ---------------------------------------------------------------------------------------------------------------

_FORMAT = """
Reply in exactly this layout, with nothing before or after it:
Thought: <your reasoning about the latest observation and what to do next>
Action: <exactly one action, written on this single line>
One Action line per reply: never write a second action, and never add text after the action."""


def _react(body: str) -> str:
    return body.strip() + "\n" + _FORMAT


_TOOL_FORMAT = """
Every action is a tool call written as `TOOL with Action Input: ARGS`, where ARGS is a dictionary of the tool's
parameters with double-quoted keys, on the same line, e.g. `{example}`. A tool without parameters takes `{{}}`.
ARGS is read as a Python literal: use quoted strings, numbers and lists, and True/False/None (never
true/false/null). Copy ids and coordinates from earlier observations; never invent them. The episode ends as soon
as an action contains the word "finish", so use that word only in the final `finish` call, which carries your
answer. `check_valid_actions` (where offered) lists the tools again."""


def _tools(intro: str, tools: str, rules: str, example: str) -> str:
    return _react(f"{intro.strip()}\n\nTools:\n{tools.strip()}\n{_TOOL_FORMAT.format(example=example)}\n\n"
                  f"{rules.strip()}")


INSTRUCTIONS: dict[str, str] = {
    "textcraft": _react("""
You are crafting items in a text-only version of Minecraft. The first observation lists the crafting recipes
you may use and names the goal item; a recipe reads `craft <target> using <ingredients>`.

Actions (always state the quantity):
- `get N ITEM` takes N of a basic item, e.g. `get 1 blue orchid`. Do not say where it comes from (inventory or
  surroundings). Items that have a recipe cannot be fetched; craft them.
- `craft N TARGET using N A, N B, ...` applies one of the listed recipes, for instance
  `craft 1 light blue dye using 1 blue orchid` or `craft 1 golden carrot using 8 gold nugget, 1 carrot`.
  Ingredients are separated by commas and each has its own count.
- `inventory` shows what you are carrying.

Use only the recipes you were given. Where a recipe names a generic ingredient such as `planks`, a specific kind
such as `dark oak planks` also works. Item names are lowercase words separated by spaces; punctuation in an
action is dropped. The episode ends, successfully, once the goal item is in your inventory.
"""),
    "babyai": _react("""
You are an agent in a BabyAI grid world. Each observation states your goal, the objects you can see (colour,
kind and a number, with how many steps ahead and to the left or right they are), what you carry, and ends with
`Available actions: [...]`, the actions that are possible right now. Prefer one from that list.

Actions:
- `turn left`, `turn right`, `move forward`
- `go to <colour> <object> <n>`, e.g. `go to red ball 1`; doors carry their state: `go to blue closed door 1`
- `pickup <colour> <object> <n>` (one word, `pickup`), e.g. `pickup green key 1`; you can hold one object
- `drop` puts down what you carry, in front of you
- `toggle` opens or closes the door right in front of you
- `go through <colour> open door <n>`
- `toggle and go through <colour> closed door <n>` (or `locked door`); a locked door opens only while you carry
  a key of its colour
- `check available actions` lists the possible actions again

Colours: red, green, blue, purple, yellow, grey. Objects: ball, box, key, door. The episode ends when the goal
is achieved; the fewer moves it takes, the higher the score.
"""),
    "sciworld": _react("""
You are an agent in ScienceWorld, a text simulation of rooms such as a kitchen, a workshop, a greenhouse and the
outdoors, where you carry out elementary science tasks (boiling water, growing plants, building circuits,
measuring and classifying things). The first observation holds the task and your surroundings. OBJ and LOC are
names as they appear in the observations.

Actions:
- `look around`, `look at OBJ`, `look in OBJ`, `examine OBJ`, `read OBJ`
- `go to LOC`, e.g. `go to kitchen` (open a closed door first: `open door to kitchen`)
- `open OBJ`, `close OBJ`, `activate OBJ`, `deactivate OBJ`
- `pick up OBJ` (into your inventory), `put down OBJ`, `move OBJ to OBJ`
- `pour OBJ into OBJ`, `dunk OBJ into OBJ`, `mix OBJ`
- `connect OBJ to OBJ`, `disconnect OBJ`
- `use OBJ`, `use OBJ on OBJ`, `eat OBJ`, `flush OBJ`
- `focus on OBJ` declares the object the task is about. Use it only on the object the task asks for: focusing
  on the wrong one fails the task.
- `wait` (ten time steps), `wait1` (one time step), `inventory`, `task` (repeats the task)

When the environment finds a request ambiguous it lists numbered choices; answer with the number alone, e.g.
`0`. "No known action matches that input." means the action was not understood. The episode ends when the task
is completed (score 100) or failed.
"""),
    "alfworld": _react("""
You are an agent in a simulated household (ALFWorld) and must complete the task stated in the first observation,
such as putting a clean mug on the coffee machine. The list after `AVAILABLE ACTIONS:` holds the commands that
are valid right now; copy one of them exactly.

Command forms (objects and receptacles carry a number, e.g. `mug 2`, `countertop 1`):
- `go to RECEP`, e.g. `go to countertop 1`
- `open RECEP`, `close RECEP`
- `take OBJ from RECEP`, e.g. `take apple 1 from countertop 1`
- `put OBJ in/on RECEP`, with `in/on` written literally, e.g. `put apple 1 in/on fridge 1`
- `heat OBJ with RECEP` (microwave), `cool OBJ with RECEP` (fridge), `clean OBJ with RECEP` (sinkbasin)
- `use OBJ`, e.g. `use desklamp 1` to switch it on; `toggle OBJ`; `examine OBJ`
- `look`, `inventory`

A reply of "Nothing happens." means the command had no effect; try something else. The episode ends when the
task is done or the step limit is reached.
"""),
    "webshop": _react("""
You are shopping in WebShop, a simulated online store, for a product that meets the instruction in the
observation (its attributes, options such as size or colour, and a price limit). An observation shows the
current page with its parts separated by `[SEP]`; buttons, product ids and option values are clickable.

Actions:
- `search[KEYWORDS]` runs a search; it works only on a page with a search box. Choose the keywords carefully.
- `click[VALUE]` clicks a clickable value shown on the page, written as shown (case does not matter), e.g.
  `click[b09qkp7xqq]`, `click[large]`, `click[buy now]`, `click[back to search]`, `click[next >]`.

No space goes between the action name and the bracket. An invalid action leaves the page unchanged. On a product
page, choose the required options, then `click[buy now]`: buying ends the episode, and the reward reflects how
well the purchase matches the instruction.
"""),
    "sqlgym": _react("""
You answer a question about a SQLite database (the BIRD benchmark) with a SQL query. The observation describes
the database and asks the question. You have exactly one attempt: the first query you send is executed and the
episode ends. It succeeds when its result rows equal those of the reference query (order does not matter).

The action is one SQLite SELECT statement (a WITH clause may lead it) on a single line, with no code fence and
no comments, e.g. `SELECT COUNT(*) FROM schools WHERE County = 'Alameda';`. Put backticks around table or
column names that contain spaces or symbols. Send one statement only. Use the Thought to reason about which
tables, joins and filters the question needs.
"""),
    "searchqa": _react("""
You answer an open-domain factual question; the observation states it. You may consult a Wikipedia search
engine: each search returns the top passages wrapped in <information>...</information>.

Actions:
- `<search>QUERY</search>` looks something up, e.g. `<search>capital of Australia</search>`.
- `<answer>ANSWER</answer>` gives your final answer, e.g. `<answer>Canberra</answer>`.

Search whenever your own knowledge is not enough; answer directly when you are sure. The answer must be the bare
entity or short phrase: it is compared with the reference after lowercasing and removing punctuation and
articles. A correct answer ends the episode; a wrong one is refused and you may search or answer again.
"""),
    "maze": _react("""
You are solving a maze. Each observation gives the goal's position, your current position and the walls next to
you (above, below, to your left, to your right). A position is a pair of numbers: `move down` adds 1 to the
first, `move right` adds 1 to the second, and `move up` and `move left` subtract 1. Walking into a wall leaves
you where you are.

Actions, exactly as written: `move up`, `move down`, `move left`, `move right`.

Reach the goal in as few moves as possible. Arriving there shows `Success` and ends the episode; once 50 moves
are used up without reaching it, the episode ends with `Failure`.
"""),
    "wordle": _react("""
You are playing Wordle: find a hidden five-letter English word in at most 6 guesses. Write a guess as the
word's five lowercase letters separated by spaces, e.g. `s h i r e`.

After each guess you get five feedback letters, one per position, separated by spaces (e.g. `b y g g b`):
`g` means the letter is in the word at this position, `y` means it is in the word but elsewhere, `b` means it
is not in the word. Only words from the game's vocabulary are accepted; anything else is answered with
`invalid word` and still uses up a guess. Every guess should agree with all the feedback so far.

The game ends when you guess the word or after 6 guesses.
"""),
    "weather": _tools(
        "You are an assistant that answers questions about weather and places by calling tools. The first "
        "observation states the goal.", """
- get_user_current_date(): today's date, YYYY-MM-DD
- get_user_current_location(): the user's city
- get_latitude_longitude(name): candidate coordinates for a place name
- get_elevation(latitude, longitude)
- get_distance(latitude1, longitude1, latitude2, longitude2): kilometres between two points
- get_current_temp / get_current_rain / get_current_snow (latitude, longitude, current_date)
- get_historical_temp / get_historical_rain / get_historical_snow (latitude, longitude, start_date, end_date)
- get_temp_forecast / get_rain_forecast / get_snow_forecast (latitude, longitude, start_date, end_date)
- get_current_air_quality_index(latitude, longitude, current_date): PM2.5 index
- get_historical_air_quality_index(latitude, longitude, start_date, end_date)
- get_air_quality_level(air_quality_index): good, fair, moderate, poor, very poor or extremely poor
- check_valid_actions()
- finish(answer): return the answer (a string, number or list) and end the task
""", """
Get a place's coordinates from get_latitude_longitude instead of recalling them. Dates are YYYY-MM-DD; work out
relative dates (yesterday, next week) from get_user_current_date.
""", 'get_historical_temp with Action Input: {"latitude": 31.22, "longitude": 121.46, '
     '"start_date": "2015-01-01", "end_date": "2015-01-01"}'),
    "movie": _tools(
        "You are an assistant that answers questions about films and people in film by calling tools backed by a "
        "movie database. The first observation states the goal.", """
- get_search_movie(movie_name): id, title and overview of the best match
- get_movie_details(movie_id): budget, genres, revenue, average vote, release date
- get_movie_production_companies(movie_id), get_movie_production_countries(movie_id)
- get_movie_cast(movie_id): top 10 cast; get_movie_crew(movie_id): up to 10 crew (directors, producers, writers)
- get_movie_keywords(movie_id), get_movie_alternative_titles(movie_id), get_movie_translation(movie_id)
- get_search_person(person_name): id and name of the best match
- get_person_details(person_id): biography, birthday, place of birth
- get_person_cast(person_id), get_person_crew(person_id): up to 10 of the person's film roles
- get_person_external_ids(person_id): IMDb, Facebook, Instagram and Twitter ids
- check_valid_actions()
- finish(answer): return the answer (a string, number or list) and end the task
""", """
Obtain movie and person ids through get_search_movie and get_search_person; do not guess them.
""", 'get_movie_details with Action Input: {"movie_id": "934433"}'),
    "academia": _tools(
        "You are an assistant that answers questions about academic papers and authors by querying two graphs: "
        "PaperNet (papers, linked by citations) and AuthorNet (authors, linked by collaborations). The first "
        "observation states the goal.", """
- loadPaperNet(), loadAuthorNet(): load a graph; do this before querying it
- neighbourCheck(graph, node): neighbours of a node; graph is "PaperNet" (cited papers) or "AuthorNet"
  (collaborators)
- paperNodeCheck(node): a paper's authors, year, venue, citation count, keywords and document type
- authorNodeCheck(node): an author's name and organisation
- authorEdgeCheck(node1, node2): the papers two authors wrote together
- paperEdgeCheck(node1, node2): the link between two papers
- check_valid_actions()
- finish(answer): return the answer (a string, number or list) and end the task
""", """
Nodes are named by the paper's full title or the author's full name.
""", 'paperNodeCheck with Action Input: {"node": "Attention Is All You Need"}'),
    "todo": _tools(
        "You are an assistant that manages a user's Todoist account (projects and tasks) by calling tools. The "
        "first observation states the goal: a question to answer or changes to make.", """
- get_user_current_date(), get_user_current_location()
- get_projects(): every project with its id, name, order, colour and favourite flag
- update_project(project_id, is_favorite): is_favorite is "True" or "False"
- get_tasks(project_id): the project's tasks with id, content, completion, priority (1 normal to 4 urgent), due
  date
- get_task_description(task_id), get_task_duration(task_id)
- complete_task(task_id), delete_task(task_id), update_task(task_id, due_date)
- check_valid_actions()
- finish(answer): end the task; answer is the reply to a question, or "done" after an operation
""", """
Look project and task ids up with get_projects and get_tasks; do not guess them.
""", 'get_tasks with Action Input: {"project_id": "12345"}'),
    "sheet": _tools(
        "You are an assistant that reads and edits spreadsheets by calling tools. The first observation states "
        "the goal and names the sheet.", """
- open_sheet(name), del_sheet(name)
- get_all_values(), get_range_values(start_position, end_position), get_cell_value(position), get_note(position)
- get_A1_annotation(row, col): the A1 name of a cell
- update_cell(position, value), update_range(start_position, end_position, values_list), update_note(position,
  content)
- insert_rows(values_list, row_idx), insert_cols(values_list, col_idx): values_list is a list of lists
- delete_batch_data(dimension, index_list): dimension "row" or "col"
- freeze_data(dimension, num): dimension "rows" or "columns"
- sort_sheet_by_col(col_num, order): order "asc" or "des"
- merge_cells(start_position, end_position)
- filter_cells(query, in_row, in_column): positions of matching cells
- get_value_by_formula(start_position, end_position, position_list, operator) and
  update_cell_by_formula(start_position, end_position, position_list, result_position, operator): apply SUM,
  AVERAGE, COUNT, MAX, MIN, MINUS or PRODUCT to a range or to position_list
- finish(): end the task (takes `{}`)
""", """
Open the sheet named in the goal first and read it with get_all_values. Cells use A1 notation; rows and columns
count from 1. Freeze the header row before sorting.
""", 'update_cell with Action Input: {"position": "B2", "value": 42}'),
}

WEBARENA_INSTRUCTIONS = """You are an autonomous agent that completes tasks in a web browser.

Every observation holds:
- OBSERVATION: the current page as an accessibility tree, one element per line with a numeric id in square
  brackets, e.g. `[12] button 'Submit'` or `[1534] textbox 'Search' required: False`;
- URL: the address of the current page;
- OBJECTIVE: the task to complete;
- PREVIOUS ACTION: the action you issued last (use it to follow your progress).

Actions; every argument goes in square brackets:
- `click [id]`: click the element with that id.
- `type [id] [content] [1]`: type content into the field with that id; the last bracket is 1 to press Enter
  afterwards or 0 not to (Enter is pressed when it is left out).
- `hover [id]`: move the pointer over an element.
- `press [key_comb]`: press a key combination, e.g. `press [Control+v]` or `press [Enter]`.
- `scroll [down]` or `scroll [up]`: scroll the page.
- `new_tab`: open an empty tab. `tab_focus [tab_index]`: switch to a tab by index. `close_tab`: close this tab.
- `goto [url]`: open a URL. `go_back`, `go_forward`: move through the history.
- `stop [answer]`: finish. Put the answer in the brackets when the task asks for information, `stop [N/A]` if
  the task cannot be done, or leave the brackets empty otherwise. Nothing comes after a stop.
Other sites are listed on the homepage, http://homepage.com.

Rules: issue only an action that the current observation supports, one action per answer. Think it through
step by step, then end your answer with the sentence `In summary, the next action I will perform is` followed by
the action in triple backticks, for example:
Let's think step by step. The objective asks for the cheapest laptop, and the search box is [164]. Typing a
query and pressing Enter should list the laptops. In summary, the next action I will perform is
```type [164] [laptop] [1]```
Only the first ``` fence of your answer is read, so use triple backticks nowhere else.
"""

# ---------------------------------------------------------------------------------------------------------------
# Action grammars
# ---------------------------------------------------------------------------------------------------------------

_COUNT = r"[0-9]{1,3}"
_TC_ITEM = r"[a-z](?:[a-z0-9 ]{0,48}[a-z0-9])?"
_TC_STACK = _COUNT + " " + _TC_ITEM

_COLOR = r"(?:red|green|blue|purple|yellow|grey)"
_NUM = r"[0-9]{1,2}"

_SW_OBJ = r"[A-Za-z0-9](?:[A-Za-z0-9 ,'()-]{0,78}[A-Za-z0-9)])?"
_ALF_OBJ = r"[a-z](?:[a-z0-9 ]{0,48}[a-z0-9])?"
_WS_ARG = r"[^\n\[\]]{1,200}"


def _tool_pattern(names: tuple[str, ...]) -> str:
    return "(?:" + "|".join(names) + r") with Action Input: \{[^\n]{0,800}\}"


ACTION_PATTERNS: dict[str, str] = {
    "textcraft": rf"inventory|get {_TC_STACK}|craft {_TC_STACK} using {_TC_STACK}(?:, {_TC_STACK}){{0,8}}",
    "babyai": (
        r"turn left|turn right|move forward|drop|toggle|check available actions|go to goal"
        rf"|go to {_COLOR} (?:ball|box|key|lava) {_NUM}"
        rf"|go to {_COLOR} (?:open|closed|locked) door {_NUM}"
        rf"|pickup {_COLOR} (?:ball|box|key) {_NUM}"
        rf"|go through {_COLOR} open door {_NUM}"
        rf"|toggle and go through {_COLOR} (?:closed|locked) door {_NUM}"
    ),
    "sciworld": (
        r"look around|inventory|task|wait1?|[0-9]{1,2}"
        rf"|(?:look at|look in|examine|read|go to|open|close|activate|deactivate|pick up|put down|drop|mix|eat|flush"
        rf"|disconnect|focus on|use) {_SW_OBJ}"
        rf"|(?:connect|move) {_SW_OBJ} to {_SW_OBJ}"
        rf"|(?:pour|dunk) {_SW_OBJ} into {_SW_OBJ}"
        rf"|use {_SW_OBJ} on {_SW_OBJ}"
    ),
    "alfworld": (
        r"look|inventory"
        rf"|(?:go to|open|close|use|toggle|examine) {_ALF_OBJ}"
        rf"|take {_ALF_OBJ} from {_ALF_OBJ}"
        rf"|put {_ALF_OBJ} in/on {_ALF_OBJ}"
        rf"|(?:heat|cool|clean) {_ALF_OBJ} with {_ALF_OBJ}"
    ),
    "webshop": rf"search\[{_WS_ARG}\]|click\[{_WS_ARG}\]",
    "sqlgym": r"(?:[Ss][Ee][Ll][Ee][Cc][Tt]|[Ww][Ii][Tt][Hh]) [^\n]{1,1000}",
    "searchqa": r"<search>[^\n<>]{1,300}</search>|<answer>[^\n<>]{1,300}</answer>",
    "maze": r"move (?:up|down|left|right)",
    "wordle": r"[a-z] [a-z] [a-z] [a-z] [a-z]|[a-z]{5}",
    **{env: _tool_pattern(TOOLS[env]) for env in TOOL_ENVS},
}

WEBARENA_ACTION_PATTERN = (
    r"(?:click|hover) \[[0-9]{1,6}\]"
    r"|type \[[0-9]{1,6}\] \[[^\n]{1,300}\](?: \[[01]\])?"
    r"|press \[[A-Za-z0-9+_-]{1,40}\]"
    r"|scroll \[(?:down|up)\]"
    r"|new_tab|close_tab|go_back|go_forward"
    r"|tab_focus \[[0-9]{1,2}\]"
    r"|goto \[[^ \n\[\]]{1,500}\]"
    r"|stop \[[^\n]{0,500}\]"
)

EXAMPLES: dict[str, list[str]] = {
    "webarena": ["click [12]", "type [164] [restaurants near CMU] [1]", "type [7] [hello world] [0]",
                 "press [Control+v]", "scroll [down]", "goto [http://homepage.com]", "stop [N/A]"],
    "textcraft": ["get 1 blue orchid", "craft 1 light blue dye using 1 blue orchid",
                  "craft 1 golden carrot using 8 gold nugget, 1 carrot", "inventory", "get 4 dark oak logs"],
    "babyai": ["turn left", "go to red ball 1", "pickup green key 1", "toggle and go through yellow locked door 1",
               "go through blue open door 2", "check available actions"],
    "sciworld": ["look around", "open door to kitchen", "pour cup containing water into metal pot",
                 "focus on thermometer", "use thermometer on substance in metal pot", "0"],
    "alfworld": ["go to countertop 1", "take apple 1 from countertop 1", "put apple 1 in/on fridge 1",
                 "heat mug 2 with microwave 1", "use desklamp 1", "look"],
    "webshop": ["search[slim fit women's jumpsuit high waist]", "click[b09qkp7xqq]", "click[large]",
                "click[buy now]", "click[next >]"],
    "sqlgym": ["SELECT COUNT(*) FROM schools WHERE County = 'Alameda';",
               "SELECT `Free Meal Count (K-12)` FROM frpm ORDER BY `Enrollment (K-12)` DESC LIMIT 1",
               "WITH t AS (SELECT id FROM users) SELECT COUNT(*) FROM t;"],
    "searchqa": ["<search>capital of Australia</search>", "<answer>Canberra</answer>",
                 "<search>who directed the film Jaws 1975</search>"],
    "maze": ["move up", "move down", "move left", "move right"],
    "wordle": ["s h i r e", "f r o w n", "crane"],
    "weather": ["get_user_current_location with Action Input: {}",
                'get_latitude_longitude with Action Input: {"name": "Shanghai"}',
                'get_historical_temp with Action Input: {"latitude": 31.22222, "longitude": 121.45806, '
                '"start_date": "2015-01-01", "end_date": "2015-01-01"}',
                'finish with Action Input: {"answer": -0.1}'],
    "movie": ['get_search_movie with Action Input: {"movie_name": "Scream 6"}',
              'get_movie_details with Action Input: {"movie_id": "934433"}',
              'finish with Action Input: {"answer": "2023-03-08"}'],
    "academia": ["loadPaperNet with Action Input: {}",
                 'neighbourCheck with Action Input: {"graph": "AuthorNet", "node": "Geoffrey Hinton"}',
                 'finish with Action Input: {"answer": "2021"}'],
    "todo": ["get_projects with Action Input: {}",
             'update_project with Action Input: {"project_id": "12345", "is_favorite": "True"}',
             'finish with Action Input: {"answer": "yes"}'],
    "sheet": ['open_sheet with Action Input: {"name": "Sheet90"}', "get_all_values with Action Input: {}",
              'delete_batch_data with Action Input: {"dimension": "row", "index_list": [3, 4, 5]}',
              "finish with Action Input: {}"],
}


# ---------------------------------------------------------------------------------------------------------------
# What the env server receives
# ---------------------------------------------------------------------------------------------------------------
