// A stand-in extraction worker for the pool tests: the job's bytes are a command.
//   echo:<text>  answers <text> at once      hang  never answers (a parser stuck in a loop)
//   crash        throws outside any handler  exit  ends the worker's thread
declare const self: Worker

self.onmessage = (event: MessageEvent<{ id: number; buffer: ArrayBuffer }>) => {
  const { id, buffer } = event.data
  const command = new TextDecoder().decode(buffer)
  if (command.startsWith('echo:')) self.postMessage({ id, ok: true, text: command.slice(5), documentType: 'text' })
  else if (command === 'hang') for (;;) {}
  else if (command === 'crash') setTimeout(() => { throw new Error('parser exploded') })
  else if (command === 'exit') process.exit(3)
  else self.postMessage({ id, ok: false, reason: 'invalid', message: `unknown command ${command}` })
}
