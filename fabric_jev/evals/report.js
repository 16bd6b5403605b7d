// The eval report's worst-lines table: filter by cell, field or text; draw the first rows, more on
// request. Inlined into the page by report.py; it reads the page's own eval-data script element.
(function(){
const data=JSON.parse(document.getElementById('eval-data').textContent);
const body=document.querySelector('#worst-table tbody'),more=document.getElementById('more');
const fcell=document.getElementById('f-cell'),ffield=document.getElementById('f-field');
const ftext=document.getElementById('f-text'),count=document.getElementById('f-count');
data.cells.forEach((n,i)=>fcell.add(new Option(n,String(i))));
data.fields.forEach(f=>ffield.add(new Option(f,f)));
ffield.add(new Option('(run did not complete)','(run)'));
const js=v=>v===undefined?'':JSON.stringify(v);
// The text a search looks in, made the first time a search asks for it (not at load).
const searched=row=>row.search??(row.search=(js(row.id)+' '+js(row.input)+' '+js(row.expected)+' '+js(row.result)+' '+(row.error||'')).toLowerCase());
let matched=[],shown=0;
function cell(tr,text,cls){const td=document.createElement('td');td.textContent=text;if(cls)td.className=cls;tr.appendChild(td);return td;}
function draw(upto){
  const frag=document.createDocumentFragment();
  for(;shown<Math.min(upto,matched.length);shown++){
    const row=matched[shown],tr=document.createElement('tr');
    tr.dataset.cell=row.cell;tr.dataset.line=row.line;tr.dataset.rank=row.rank;
    cell(tr,data.cells[row.cell]);cell(tr,String(row.line));cell(tr,String(row.id));
    const c=cell(tr,(row.confidence*100).toFixed(1)+'%');c.className='conf';c.dataset.v=row.confidence;
    cell(tr,row.wrong.length?row.wrong.join(', '):row.state);cell(tr,js(row.expected),'json');
    cell(tr,row.result===null&&row.error?row.error:js(row.result),'json');
    const b=document.createElement('button');b.type='button';b.textContent='answers';
    b.addEventListener('click',()=>{const next=tr.nextSibling;if(next&&next.classList&&next.classList.contains('more')){next.remove();return;}
      const x=document.createElement('tr');x.className='more';const td=document.createElement('td');td.colSpan=8;
      const pre=document.createElement('pre');pre.textContent='input: '+JSON.stringify(row.input,null,1)+'\nanswers: '+JSON.stringify(row.answers,null,1);
      td.appendChild(pre);x.appendChild(td);tr.after(x);});
    const td=document.createElement('td');td.appendChild(b);tr.appendChild(td);frag.appendChild(tr);
  }
  body.appendChild(frag);more.hidden=shown>=matched.length;
  count.textContent=matched.length+' failed lines match'+(matched.length>shown?' ('+shown+' shown)':'')+(data.complete?'':' (the summary\'s worst lines only: write the report from an --out folder for all)');
}
function filter(){
  const c=fcell.value,f=ffield.value,t=ftext.value.trim().toLowerCase();
  matched=data.lines.filter(r=>(c===''||String(r.cell)===c)&&(f===''||(f==='(run)'?r.state!=='completed':r.wrong.includes(f)))&&(t===''||searched(r).includes(t)));
  body.textContent='';shown=0;draw(data.rowsShown);
}
fcell.addEventListener('change',filter);ffield.addEventListener('change',filter);ftext.addEventListener('input',filter);
more.addEventListener('click',()=>draw(shown+data.rowsShown));
filter();window.reportReadyAt=performance.now();window.reportReady=true;
})();
