package minitok

// corpus is the English the embedded tokenizer is built from: our own sentences
// (written for switchyard, no third-party text). Every distinct lower-case word
// becomes a whole-word token (with its leading space), so the mock engines can
// answer with readable words.
const corpus = `
The quick brown fox jumps over the lazy dog while the old cat sleeps in the warm sun.
A small team of engineers built a fast frontend that sends requests to many engines and streams the answers back to every client.
When one engine dies the others keep serving, and a request that was running there moves to a healthy engine and goes on.
Good software is simple to run, easy to read, and honest about what it does not do yet.
We measure before we change anything, and we write tests that fail when the behaviour breaks.
The river runs past the village, under the stone bridge, and into the green valley where children play after school.
In the morning the baker opens his shop, the farmer drives to the market, and the teacher walks to the school with her books.
People like to ask questions, and a good assistant gives a clear answer in a few plain words.
This model is a small mock that speaks in sentences made of common words, so you can see text flowing through the server.
Hello there, how are you today? I am fine, thank you, and I hope you are well too.
It was a bright cold day in spring, the sky was blue, the wind was soft, and the trees were full of new leaves.
She said that the best way to learn is to build something real, share it with friends, and listen to what they say.
They went home late at night, talked about the long road ahead, and made a plan for the next week.
Every message has a role and some content, the template turns the conversation into a prompt, and the tokenizer turns the prompt into numbers.
Numbers go in, numbers come out, and the detokenizer turns them back into words you can read.
Time moves on, the seasons change, the city grows, but the little garden behind the house stays the same.
You should try to keep your promises, help your neighbours, and always say thank you when someone is kind.
Our world is large and full of wonder, from the deep blue sea to the high white mountains and the quiet desert.
Light travels very fast, sound is much slower, and thought can be the fastest of all when the mind is clear.
Please tell me a story about a brave girl who found a map, crossed the forest, and discovered a hidden lake.
What would you like to know? Ask me anything, and I will do my best to help you with a short and useful reply.
`
